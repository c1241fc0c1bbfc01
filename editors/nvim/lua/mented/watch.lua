-- The daemon's event stream for the project being edited: feeds the statusline
-- (the last fire there), notifications on fires (setup{notify = true}) and the
-- rules buffers (refreshed on rule changes).
--
-- One subscription at a time, for the current buffer's project; entering a
-- buffer of another project subscribes again. When the daemon is not running
-- or goes away, this says nothing and tries again later, waiting longer each
-- time (half a second up to 30 s); the statusline shows nothing meanwhile.
local client = require("mented.client")
local daemon = require("mented.daemon")
local rules = require("mented.rules")

local uv = vim.uv or vim.loop

local M = {}

local FIRST_RETRY_MS = 500
local LAST_RETRY_MS = 30000
-- A daemon without the `subscribe` request (older than the plugin) is asked again
-- rarely: it may be upgraded and restarted.
local UNSUPPORTED_RETRY_MS = 60000
-- How many recent fires to look through for this project's last one when subscribing.
local LOG_DEPTH = 100

local state = {
  project = nil, -- the project subscribed to (or being)
  subscription = nil,
  connected = false, -- the daemon confirmed the subscription and it is open
  retry_ms = FIRST_RETRY_MS,
  retry_timer = nil,
  ticker = nil,
}
local last_fire = {} -- project -> the last fire event there (time, actions, agent, ...)

local function inside(dir, project)
  return dir == project or (project == "/" and dir:sub(1, 1) == "/") or dir:sub(1, #project + 1) == project .. "/"
end

local function redraw()
  pcall(vim.cmd, "redrawstatus!")
end

local function note_fire(project, fire)
  local known = last_fire[project]
  if known == nil or fire.time >= known.time then
    last_fire[project] = fire
  end
end

local function notify_fire(fire)
  local handles = {}
  for _, handle in ipairs(daemon.value(fire.handles) or {}) do
    handles[#handles + 1] = "[" .. handle .. "]"
  end
  local what
  local delivery = daemon.value(fire.delivery)
  if #handles == 0 then
    what = "no rule for it here"
  elseif delivery == "pointer" then
    what = "reminded of " .. table.concat(handles, " ") .. " (the session has them)"
  elseif delivery == "none" then
    what = table.concat(handles, " ") .. " not handed over"
  else
    what = table.concat(handles, " ") .. " handed over"
  end
  vim.notify(
    string.format(
      "mented: %s (%s): %s",
      table.concat(fire.actions or {}, ", "),
      tostring(daemon.value(fire.agent) or "agent"),
      what
    ),
    vim.log.levels.INFO
  )
end

local function on_event(project, event)
  if event.kind == "fire" then
    note_fire(project, event)
    redraw()
    if daemon.options.notify then
      notify_fire(event)
    end
  elseif event.kind == "rule" then
    rules.refresh()
  elseif event.kind == "config" then
    daemon.actions_cache = nil
  end
end

-- The newest fire in `project` from the daemon's log: the statusline has something
-- to show before the next fire.
local function seed(project)
  client.request(daemon.socket(), { type = "log", n = LOG_DEPTH }, function(reply, err)
    if err or state.project ~= project then
      return
    end
    for _, fire in ipairs(reply.fires or {}) do
      local cwd = daemon.value(fire.cwd)
      -- A test fire (`mentectl doctor`'s) is not the user's: never on the statusline.
      if cwd and inside(cwd, project) and #(fire.actions or {}) > 0 and fire.test ~= true then
        note_fire(project, fire)
        redraw()
        return
      end
    end
  end, daemon.options.timeout_ms)
end

local subscribe

local function retry_later(delay_ms)
  if state.retry_timer then
    return
  end
  local project = state.project
  state.retry_timer = uv.new_timer()
  state.retry_timer:start(delay_ms, 0, function()
    vim.schedule(function()
      if state.retry_timer then
        state.retry_timer:close()
        state.retry_timer = nil
      end
      if state.project == project and state.subscription == nil then
        subscribe(project)
      end
    end)
  end)
end

subscribe = function(project)
  state.subscription = client.subscribe(daemon.socket(), { type = "subscribe", project = project }, {
    on_subscribed = function()
      state.connected = true
      state.retry_ms = FIRST_RETRY_MS
      seed(project)
      rules.refresh() -- the daemon may have restarted with other rules
      redraw()
    end,
    on_event = function(event)
      on_event(project, event)
    end,
    on_end = function(err)
      local was_connected = state.connected
      state.subscription = nil
      state.connected = false
      if was_connected then
        redraw() -- the daemon went away: the statusline shows nothing
      end
      if err.code == "unknown_request" then
        retry_later(UNSUPPORTED_RETRY_MS)
      else
        local delay = state.retry_ms
        state.retry_ms = math.min(state.retry_ms * 2, LAST_RETRY_MS)
        retry_later(delay)
      end
    end,
  }, daemon.options.timeout_ms)
end

local function cancel_retry()
  if state.retry_timer then
    state.retry_timer:stop()
    state.retry_timer:close()
    state.retry_timer = nil
  end
end

--- Follow `project`: subscribe to its events (once; again after a change of project).
function M.follow(project)
  if state.project == project then
    return
  end
  if state.subscription then
    state.subscription.close()
    state.subscription = nil
  end
  cancel_retry()
  state.project = project
  state.connected = false
  state.retry_ms = FIRST_RETRY_MS
  subscribe(project)
  if state.ticker == nil then
    -- "2m ago" ages: redraw the statusline now and then while it shows a fire.
    state.ticker = uv.new_timer()
    state.ticker:start(30000, 30000, function()
      vim.schedule(function()
        if state.connected and next(last_fire) then
          redraw()
        end
      end)
    end)
  end
end

--- Stop following: close the subscription, stop retrying.
function M.stop()
  if state.subscription then
    state.subscription.close()
    state.subscription = nil
  end
  cancel_retry()
  if state.ticker then
    state.ticker:stop()
    state.ticker:close()
    state.ticker = nil
  end
  state.project = nil
  state.connected = false
end

function M.connected()
  return state.connected
end

local function ago(seconds)
  seconds = math.max(0, math.floor(seconds))
  if seconds < 10 then
    return "just now"
  elseif seconds < 60 then
    return seconds .. "s ago"
  elseif seconds < 3600 then
    return math.floor(seconds / 60) .. "m ago"
  elseif seconds < 86400 then
    return math.floor(seconds / 3600) .. "h ago"
  end
  return math.floor(seconds / 86400) .. "d ago"
end
M.ago = ago

--- "mented: git-commit 2m ago" for the last fire in `project`; "" when there is
--- none or the daemon is not connected.
function M.text(project, now)
  if not state.connected then
    return ""
  end
  local fire = last_fire[project]
  if fire == nil then
    return ""
  end
  return "mented: " .. table.concat(fire.actions or {}, ", ") .. " " .. ago((now or os.time()) - fire.time)
end

return M
