-- Runs one scenario of tests/test_nvim_plugin.py inside a real Neovim.
--
-- The scenario (tests/nvim/<name>.lua) returns a function that drives the plugin
-- as a user would and records what the user sees in `t.seen`; this harness
-- captures notifications (vim.notify), writes `t.seen` as JSON for pytest to
-- check, and quits: status 0, or 1 with the error in the report.
local scenario = assert(os.getenv("MENTED_TEST_SCENARIO"), "MENTED_TEST_SCENARIO is not set")
local report = assert(os.getenv("MENTED_TEST_REPORT"), "MENTED_TEST_REPORT is not set")
local python = os.getenv("MENTED_TEST_PYTHON")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")

local t = { seen = {}, notes = {} }

vim.notify = function(message, level)
  table.insert(t.notes, { message = message, level = level or vim.log.levels.INFO })
end

--- Wait up to `ms` for `condition()`, pumping Neovim's event loop; fail naming `what`.
function t.wait(ms, condition, what)
  if not vim.wait(ms, condition, 10) then
    error("timed out after " .. ms .. " ms waiting for " .. what, 2)
  end
end

function t.lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

--- The notifications since the last call, as their messages.
local notes_read = 0
function t.new_notes()
  local new = {}
  for i = notes_read + 1, #t.notes do
    new[#new + 1] = t.notes[i].message
  end
  notes_read = #t.notes
  return new
end

--- Wait for the next notification(s), then a little longer for any that follow.
function t.next_notes(what)
  t.wait(5000, function()
    return #t.notes > notes_read
  end, what or "a notification")
  vim.wait(200)
  return t.new_notes()
end

--- Run a program (a list of words), fail unless it exits 0; returns its output.
function t.run(argv, input)
  local out = vim.fn.system(argv, input or "")
  if vim.v.shell_error ~= 0 then
    error(table.concat(argv, " ") .. " exited " .. vim.v.shell_error .. ": " .. out, 2)
  end
  return out
end

function t.mentectl(...)
  return t.run({ python, "-m", "mented_client.cli", ... })
end

--- What an agent does before running `command` in `cwd`: the real hook shim.
function t.fire(cwd, command, session)
  local event = vim.json.encode({
    session_id = session or "nvim-test",
    cwd = cwd,
    hook_event_name = "PreToolUse",
    tool_name = "Bash",
    tool_input = { command = command },
  })
  return t.run({ python, "-m", "mented_client.shim", "claude-code" }, event)
end

--- The line number of the first line of the current buffer containing `text` (plain).
function t.find_line(text)
  for i, line in ipairs(t.lines()) do
    if line:find(text, 1, true) then
      return i
    end
  end
  error("no line with " .. vim.inspect(text) .. " in " .. vim.inspect(t.lines()), 2)
end

function t.elapsed_ms(since)
  return ((vim.uv or vim.loop).hrtime() - since) / 1e6
end

local ok, err = xpcall(function()
  dofile(here .. "/" .. scenario .. ".lua")(t)
end, debug.traceback)

t.seen.notes = t.notes
t.seen.error = (not ok) and err or nil
t.seen.messages = vim.fn.execute("messages")
local file = assert(io.open(report, "w"))
file:write(vim.json.encode(t.seen))
file:close()
vim.cmd(ok and "qall!" or "cquit 1")
