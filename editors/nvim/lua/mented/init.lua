-- mented for Neovim: the rules that apply to the project you edit, a way to add
-- and supersede them without leaving the editor, and the last fire in the
-- statusline. Pure Lua on Neovim's event loop; nothing here blocks the editor.
--
-- Layout (imports point downwards):
--   init.lua     setup(), the commands, statusline()
--   watch.lua    the event stream: last fire per project, notifications, refreshes
--   rules.lua    the rules buffer and the rule editor
--   daemon.lua   options, requests with one plain report of failures, the action table
--   client.lua   the socket: connect, frames, deadlines (libuv)
--   frame.lua    the framing, by hand (no string.pack in LuaJIT)
--   paths.lua    where the socket is;  project.lua  which project a buffer is in
local daemon = require("mented.daemon")
local project = require("mented.project")
local rules = require("mented.rules")
local watch = require("mented.watch")

local M = {}

local SCOPE_FLAGS = {
  ["++project"] = "project",
  ["++everywhere"] = "everywhere",
  ["--project"] = "project",
  ["--everywhere"] = "everywhere",
}

-- Whether the event stream is followed: once the statusline, a rules buffer or
-- notifications want it.
local following = false

local function follow()
  following = true
  watch.follow(project.of_buffer())
end

--- Options (all optional): socket, notify, scope ("ask" | "project" | "everywhere"),
--- timeout_ms. See :help mented-setup.
function M.setup(options)
  daemon.configure(options)
  if daemon.options.notify then
    follow()
  end
end

--- Called by the autocommands of plugin/mented.lua when the current buffer or directory changes.
function M.on_enter()
  if following then
    watch.follow(project.of_buffer())
  end
end

--- :MentedRules: the rules that apply to the current buffer's project.
function M.rules()
  local dir = project.of_buffer()
  rules.open(dir)
  follow()
end

-- ------------------------------------------------------------------ adding

--- `[++project|++everywhere] {action} [text]` -> scope or nil, action or nil, text.
function M.parse_add(args)
  local scope
  local rest = vim.trim(args or "")
  while true do
    local word, after = rest:match("^(%S+)%s*(.*)$")
    if word and SCOPE_FLAGS[word] then
      scope = SCOPE_FLAGS[word]
      rest = after
    else
      break
    end
  end
  local action, text = rest:match("^(%S+)%s*(.*)$")
  return scope, action and action:lower() or nil, text and vim.trim(text) or ""
end

local function scope_words(scope, dir)
  if scope == "project" then
    return "in this project (" .. dir .. ")"
  end
  return "everywhere"
end

local function choose_scope(scope, action, dir, then_do)
  scope = scope or daemon.options.scope
  if scope == "project" or scope == "everywhere" then
    then_do(scope)
    return
  end
  vim.ui.select({ "project", "everywhere" }, {
    prompt = "Where does the rule for " .. action .. " apply?",
    format_item = function(item)
      return item == "project" and ("this project: " .. dir) or "everywhere"
    end,
  }, function(choice)
    if choice then
      then_do(choice)
    end
  end)
end

-- The reply and error handlers of a request that writes a rule: say what
-- `message(reply)` says, refresh the listing, and tell `done` whether it worked.
local function on_saved(message, done)
  return function(reply)
    vim.notify(message(reply), vim.log.levels.INFO)
    rules.refresh()
    done(true)
  end, function(err)
    daemon.report(err)
    done(false)
    return true
  end
end

local function store(action, scope, dir, text, done)
  daemon.request({
    type = "store",
    content = text,
    memory_type = "procedural",
    tags = { "trigger:" .. action },
    project = scope == "project" and dir or nil,
  }, on_saved(function(reply)
    return "mented: added [" .. daemon.handle(reply.id) .. "] for " .. action .. ", " .. scope_words(scope, dir)
  end, done))
end

local function known_action(actions, action)
  for _, known in ipairs(actions) do
    if known.name == action then
      return true
    end
  end
  return false
end

--- :MentedAdd [++project|++everywhere] {action} [text]
function M.add(args)
  local scope, action, text = M.parse_add(args)
  if action == nil then
    vim.notify(
      "mented: which action? :MentedAdd {action} [text] (<Tab> completes the actions)",
      vim.log.levels.WARN
    )
    return
  end
  local dir = project.of_buffer()
  local function with_actions(actions, err)
    if err and err.code == "not_running" then
      daemon.report(err)
      return
    end
    -- The hook matches commands with the daemon's table: a rule for an action
    -- not in it would never fire. (A daemon too old to list its actions is trusted.)
    if actions and not known_action(actions, action) then
      vim.notify(
        "mented: there is no action '"
          .. action
          .. "' in the daemon's table, so a rule for it would never fire; "
          .. ":MentedAdd <Tab> lists the actions (or `mentectl actions`)",
        vim.log.levels.WARN
      )
      return
    end
    choose_scope(scope, action, dir, function(chosen)
      if text ~= "" then
        store(action, chosen, dir, text, function() end)
        return
      end
      rules.edit("add/" .. action, dir, "", {
        "",
        "The rule for " .. action .. " above applies " .. scope_words(chosen, dir) .. ".",
        ":w saves it, :q! leaves. Lines starting with '#' are left out.",
      }, function(rule, done)
        store(action, chosen, dir, rule, done)
      end)
    end)
  end
  if daemon.actions_cache then
    with_actions(daemon.actions_cache)
  else
    daemon.fetch_actions(with_actions)
  end
end

--- Completion of :MentedAdd: the scope flags and the daemon's actions, then nothing.
function M.complete_add(arglead, cmdline, cursorpos)
  local before = cmdline:sub(1, cursorpos)
  local words = vim.split(vim.trim(before), "%s+")
  -- words[1] is the command; a word is being completed unless the line ends in a space.
  local done = #words - 1 - ((before:match("%s$") and 0) or 1)
  for i = 2, 1 + done do
    if not SCOPE_FLAGS[words[i]] then
      return {} -- the action is given: the rest is the rule's text
    end
  end
  local candidates = {}
  if arglead:sub(1, 1) == "+" then
    candidates = { "++project", "++everywhere" }
  elseif arglead:sub(1, 1) == "-" then
    candidates = { "--project", "--everywhere" }
  else
    candidates = daemon.action_names()
  end
  return vim.tbl_filter(function(name)
    return vim.startswith(name, arglead)
  end, candidates)
end

-- -------------------------------------------------------------- superseding

local function supersede_with(memory, text, done)
  daemon.request(
    { type = "supersede", id = memory.id, content = text },
    on_saved(function(reply)
      return "mented: [" .. daemon.handle(memory.id) .. "] superseded by [" .. daemon.handle(reply.id) .. "]"
    end, done)
  )
end

local function rewrite(memory, text)
  if rules.is_team_rule(memory) then
    -- The daemon only reads these: they live in the project's files, for the team.
    vim.notify(
      "mented: ["
        .. daemon.handle(memory.id)
        .. "] is a team rule: change it in "
        .. tostring(daemon.value(memory.project))
        .. "/.mented/rules.jsonl and commit it (then `mentectl trust` again)",
      vim.log.levels.WARN
    )
    return
  end
  if text ~= "" then
    supersede_with(memory, text, function() end)
    return
  end
  local handle = daemon.handle(memory.id)
  local actions = {}
  for _, tag in ipairs(memory.tags or {}) do
    actions[#actions + 1] = tag:match("^trigger:(.+)$") or (tag == "pinned" and "pinned" or nil)
  end
  rules.edit("supersede/" .. handle, project.of_buffer(), memory.content, {
    "",
    "Rewrite rule [" .. handle .. "] (" .. table.concat(actions, ", ") .. ") above.",
    "The old version stops firing at once and stays in its history.",
    ":w saves it, :q! leaves. Lines starting with '#' are left out.",
  }, function(rule, done)
    supersede_with(memory, rule, done)
  end)
end

--- :MentedSupersede [handle [text]]: without a handle, the rule under the
--- cursor in the rules buffer.
function M.supersede(args)
  local handle, text = vim.trim(args or ""):match("^(%S+)%s*(.*)$")
  text = text and vim.trim(text) or ""
  if handle == nil then
    local entry = rules.entry_at_cursor()
    if entry == nil or entry.memory == nil then
      vim.notify(
        "mented: put the cursor on a rule in :MentedRules, or name one: :MentedSupersede {handle} [text]",
        vim.log.levels.WARN
      )
      return
    end
    rewrite(entry.memory, "")
    return
  end
  daemon.request({ type = "get", id = handle }, function(reply)
    rewrite(reply.memory, text)
  end)
end

function M.complete_supersede(arglead, cmdline, cursorpos)
  local before = cmdline:sub(1, cursorpos)
  if #vim.split(vim.trim(before), "%s+") - (before:match("%s$") and 0 or 1) > 1 then
    return {}
  end
  return vim.tbl_filter(function(handle)
    return vim.startswith(handle, arglead)
  end, rules.shown_handles())
end

-- -------------------------------------------------------------- statusline

--- The last fire in the project of the window's buffer, e.g. "mented: git-commit 2m ago";
--- "" before the first one and while the daemon is not running.
function M.statusline()
  local current = vim.api.nvim_get_current_win()
  local win = vim.g.statusline_winid or current
  if not vim.api.nvim_win_is_valid(win) then
    win = current
  end
  local dir = project.of_buffer(vim.api.nvim_win_get_buf(win))
  if win == current then
    following = true
    watch.follow(dir) -- only the current window's project: others would take turns
  end
  return watch.text(dir)
end

return M
