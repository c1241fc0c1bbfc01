-- The plugin's options and its one way to ask the daemon something.
--
-- Every command goes through `request`, so a daemon that is not running is
-- reported the same way everywhere: once per command, plainly, with how to
-- start it. The statusline and the event stream never report it (see watch.lua).
local client = require("mented.client")
local paths = require("mented.paths")

local M = {}

M.defaults = {
  socket = nil, -- the daemon's socket; nil: as mented finds it ($MENTED_SOCKET, ...)
  notify = false, -- vim.notify on each fire in the current project
  scope = "ask", -- where :MentedAdd puts a rule: "ask", "project" or "everywhere"
  timeout_ms = 3000, -- how long a command waits for the daemon
}

M.options = vim.deepcopy(M.defaults)

function M.configure(options)
  M.options = vim.tbl_extend("force", vim.deepcopy(M.defaults), options or {})
  M.actions_cache = nil
end

function M.socket()
  return paths.socket(M.options.socket)
end

--- A value from a reply: JSON null (vim.NIL) read as nil.
function M.value(x)
  if x == vim.NIL then
    return nil
  end
  return x
end

--- The short handle of a rule, as the agent sees it: the last 8 characters of its id.
function M.handle(id)
  return string.lower(string.sub(id, -8))
end

--- Tell the user why a command could not be done, in one message.
function M.report(err)
  if err.code == "not_running" then
    vim.notify(
      "mented is not running (nothing answers at "
        .. M.socket()
        .. "). Start it with `mentectl setup` (a service that keeps it running) or `mented` in a terminal.",
      vim.log.levels.WARN
    )
  elseif err.code == "timeout" then
    vim.notify("mented did not answer in time (" .. M.socket() .. "); is it stuck? `mentectl status` says.", vim.log.levels.WARN)
  else
    vim.notify("mented: " .. err.message, vim.log.levels.ERROR)
  end
end

--- Ask the daemon; `on_reply(reply)` on success, else the failure is reported
--- (or handed to `on_failure(err)` when given, which returns true if it handled it).
function M.request(message, on_reply, on_failure)
  return client.request(M.socket(), message, function(reply, err)
    if err then
      if not (on_failure and on_failure(err)) then
        M.report(err)
      end
      return
    end
    on_reply(reply)
  end, M.options.timeout_ms)
end

-- The daemon's action table, for completion and for checking an action name:
-- a list of {name = ..., description = ...}, fetched once and again after a
-- config reload; nil until then (and after a failure, to ask again next time).
M.actions_cache = nil
local waiting = nil -- callbacks of the fetch under way

--- Fetch the action table (silently) and call `done(actions | nil, failure)`.
function M.fetch_actions(done)
  if waiting then
    waiting[#waiting + 1] = done
    return
  end
  waiting = { done }
  client.request(M.socket(), { type = "actions" }, function(reply, err)
    M.actions_cache = (not err) and (reply.actions or {}) or nil
    local callbacks = waiting
    waiting = nil
    for _, callback in ipairs(callbacks) do
      if callback then
        callback(M.actions_cache, err)
      end
    end
  end, M.options.timeout_ms)
end

--- The action names, for completion: asks the daemon the first time, waiting
--- at most half a second (a daemon that is not running fails at once).
function M.action_names()
  if M.actions_cache == nil then
    local finished = false
    M.fetch_actions(function()
      finished = true
    end)
    vim.wait(500, function()
      return finished
    end, 10)
  end
  local names = {}
  for _, action in ipairs(M.actions_cache or {}) do
    names[#names + 1] = action.name
  end
  return names
end

return M
