-- The rules buffer (:MentedRules) and the small buffer a rule is written in
-- (:MentedAdd and :MentedSupersede without text).
--
-- The rules buffer lists the rules that apply to one project, grouped by action,
-- each with its handle; it remembers which rule each line shows, so that
-- :MentedSupersede (or `s`) knows the rule under the cursor. It is refreshed
-- when the daemon reports a rule change (watch.lua) and after each change made here.
local daemon = require("mented.daemon")

local M = {}

local PINNED = "pinned"
local shown = {} -- rules buffer -> { project = dir, at_line = { [lnum] = memory } }

--- Whether `memory` is a team rule: committed in a project's `.mented/` folder
--- and trusted, listed with the user's own but kept in that folder, not the store.
function M.is_team_rule(memory)
  return daemon.value(memory.origin) == "project"
end

local function scope_note(memory, project)
  local notes = {}
  local scoped = daemon.value(memory.project)
  if M.is_team_rule(memory) then
    notes[#notes + 1] = "team rule, " .. (scoped or project) .. "/.mented/"
  elseif scoped == project then
    notes[#notes + 1] = "this project"
  elseif scoped then
    notes[#notes + 1] = "project " .. scoped
  end
  local agent = daemon.value(memory.agent)
  if agent then
    notes[#notes + 1] = agent .. " only"
  end
  if #notes == 0 then
    return ""
  end
  return "  (" .. table.concat(notes, ", ") .. ")"
end

--- The groups of `memories`: { {name = action, rules = {...}}, ... }, actions
--- sorted by name, pinned rules last; a rule for two actions is in both.
local function grouped(memories)
  local by_group, names = {}, {}
  local function add(name, memory)
    if not by_group[name] then
      by_group[name] = {}
      if name ~= PINNED then
        names[#names + 1] = name
      end
    end
    table.insert(by_group[name], memory)
  end
  for _, memory in ipairs(memories) do
    for _, tag in ipairs(memory.tags or {}) do
      local action = tag:match("^trigger:(.+)$")
      if action then
        add(action, memory)
      elseif tag == PINNED then
        add(PINNED, memory)
      end
    end
  end
  table.sort(names)
  if by_group[PINNED] then
    names[#names + 1] = PINNED
  end
  local groups = {}
  for _, name in ipairs(names) do
    groups[#groups + 1] = { name = name, rules = by_group[name] }
  end
  return groups
end

--- The lines of the rules buffer, and which rule each line shows.
function M.render(project, memories)
  local groups = grouped(memories)
  local count = #memories
  local lines = {
    "Rules for " .. project .. ": " .. count .. (count == 1 and " rule" or " rules"),
    "s: supersede  a: add  R: refresh  q: close  (:help mented)",
  }
  local at_line = {}
  if #groups == 0 then
    lines[#lines + 1] = ""
    lines[#lines + 1] = "No rule applies here yet. Add one: :MentedAdd {action} {text}"
  end
  for _, group in ipairs(groups) do
    lines[#lines + 1] = ""
    lines[#lines + 1] = group.name == PINNED and "pinned (every session)" or group.name
    at_line[#lines] = { action = group.name ~= PINNED and group.name or nil }
    for _, memory in ipairs(group.rules) do
      local head = "  [" .. daemon.handle(memory.id) .. "] "
      local text_lines = vim.split(memory.content, "\n", { plain = true })
      for i, text in ipairs(text_lines) do
        local line = (i == 1 and head or string.rep(" ", #head)) .. text
        if i == #text_lines then
          line = line .. scope_note(memory, project)
        end
        lines[#lines + 1] = line
        at_line[#lines] = { action = group.name ~= PINNED and group.name or nil, memory = memory }
      end
    end
  end
  return lines, at_line
end

local function buffer_name(project)
  return "mented://rules" .. project
end

local function find_buffer(project)
  for buf, info in pairs(shown) do
    if info.project == project and vim.api.nvim_buf_is_valid(buf) then
      return buf
    end
  end
  return nil
end

local function fill(buf, project, memories)
  local lines, at_line = M.render(project, memories)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  shown[buf] = { project = project, at_line = at_line }
end

local function list(project, on_memories, on_failure)
  daemon.request({ type = "list", rules_only = true, cwd = project }, function(reply)
    on_memories(reply.memories or {})
  end, on_failure)
end

local function new_rules_buffer(project)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, buffer_name(project))
  vim.api.nvim_buf_set_var(buf, "mented_project", project)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "mented"
  local function map(lhs, rhs, desc)
    vim.keymap.set("n", lhs, rhs, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map("s", function()
    require("mented").supersede("")
  end, "supersede the rule under the cursor")
  map("a", function()
    local entry = M.entry_at_cursor()
    local action = entry and entry.action and (entry.action .. " ") or ""
    vim.api.nvim_feedkeys(":MentedAdd " .. action, "n", false)
  end, "add a rule")
  map("R", function()
    M.refresh(project)
  end, "refresh")
  map("q", "<cmd>close<cr>", "close")
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    callback = function()
      shown[buf] = nil
    end,
  })
  return buf
end

--- List the rules that apply to `project` in its rules buffer, and show it.
function M.open(project)
  list(project, function(memories)
    local buf = find_buffer(project) or new_rules_buffer(project)
    fill(buf, project, memories)
    local win = vim.fn.bufwinid(buf)
    if win ~= -1 then
      vim.api.nvim_set_current_win(win)
    else
      vim.cmd("split")
      vim.api.nvim_win_set_buf(0, buf)
    end
  end)
end

--- Reload the rules buffers of `project` (all of them when nil), keeping the cursor.
--- Silent when the daemon cannot be reached: the buffer keeps what it showed.
function M.refresh(project)
  for buf, info in pairs(shown) do
    if vim.api.nvim_buf_is_valid(buf) and (project == nil or info.project == project) then
      list(info.project, function(memories)
        if not vim.api.nvim_buf_is_valid(buf) then
          return
        end
        local cursors = {}
        for _, win in ipairs(vim.fn.win_findbuf(buf)) do
          cursors[win] = vim.api.nvim_win_get_cursor(win)
        end
        fill(buf, info.project, memories)
        local last = vim.api.nvim_buf_line_count(buf)
        for win, cursor in pairs(cursors) do
          vim.api.nvim_win_set_cursor(win, { math.min(cursor[1], last), cursor[2] })
        end
      end, function()
        return true
      end)
    end
  end
end

--- The projects of the rules buffers open now.
function M.projects()
  local projects = {}
  for buf, info in pairs(shown) do
    if vim.api.nvim_buf_is_valid(buf) then
      projects[info.project] = true
    end
  end
  return projects
end

--- What the cursor's line in a rules buffer shows: {action = ..., memory = ...} or nil.
function M.entry_at_cursor()
  local info = shown[vim.api.nvim_get_current_buf()]
  if not info then
    return nil
  end
  return info.at_line[vim.api.nvim_win_get_cursor(0)[1]]
end

--- The handles of the rules shown in rules buffers, for completion.
function M.shown_handles()
  local handles, seen = {}, {}
  for _, info in pairs(shown) do
    for _, entry in pairs(info.at_line) do
      if entry.memory then
        local handle = daemon.handle(entry.memory.id)
        if not seen[handle] then
          seen[handle] = true
          handles[#handles + 1] = handle
        end
      end
    end
  end
  table.sort(handles)
  return handles
end

-- -------------------------------------------------------------- rule editor

local COMMENT = "^#"

--- Open a small buffer to write a rule in; `:w` (or `:wq`, `:x`) saves it.
---
--- `title` names the buffer (mented://<title>); `help` lines are shown as
--- comments under `text`. Lines starting with '#' are left out of the rule.
--- `save(rule, done)` sends it and calls `done(true)` once the daemon took it:
--- the buffer goes away. On `done(false)` (the failure was reported) the text
--- stays: in the buffer, or in a new one when `:wq` closed it meanwhile.
function M.edit(title, project, text, help, save)
  local name = "mented://" .. title
  local existing = vim.fn.bufnr(name)
  if existing ~= -1 then
    vim.api.nvim_buf_delete(existing, { force = true })
  end
  local buf = vim.api.nvim_create_buf(false, false)
  vim.api.nvim_buf_set_name(buf, name)
  vim.api.nvim_buf_set_var(buf, "mented_project", project)
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = "mentedrule"
  local lines = vim.split(text, "\n", { plain = true })
  for _, line in ipairs(help) do
    lines[#lines + 1] = "# " .. line
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modified = false
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    buffer = buf,
    callback = function()
      local kept = {}
      for _, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
        if not line:match(COMMENT) then
          kept[#kept + 1] = line
        end
      end
      local rule = vim.trim(table.concat(kept, "\n"))
      if rule == "" then
        vim.notify("mented: the rule is empty; nothing was saved (:q! leaves)", vim.log.levels.WARN)
        return
      end
      -- Written as far as Vim knows, so that :wq and :x may close the window
      -- while the daemon is asked; a failure brings the text back.
      vim.bo[buf].modified = false
      save(rule, function(ok)
        if ok then
          if vim.api.nvim_buf_is_valid(buf) then
            for _, win in ipairs(vim.fn.win_findbuf(buf)) do
              if #vim.api.nvim_list_wins() > 1 then
                vim.api.nvim_win_close(win, true)
              end
            end
            if vim.api.nvim_buf_is_valid(buf) then
              vim.api.nvim_buf_delete(buf, { force = true })
            end
          end
        elseif vim.api.nvim_buf_is_valid(buf) then
          vim.bo[buf].modified = true
        else
          M.edit(title, project, rule, help, save)
        end
      end)
    end,
  })
  vim.cmd("split")
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_win_set_height(0, math.max(6, #lines + 1))
  return buf
end

return M
