-- The last fire in this project, in the statusline and as a notification.
return function(t)
  local mented = require("mented")
  local project, other = os.getenv("PROJECT"), os.getenv("OTHER_PROJECT")
  mented.setup({ notify = true })
  vim.cmd("edit " .. project .. "/src/main.c")
  vim.o.laststatus = 2
  vim.o.statusline = "%!v:lua.require'mented'.statusline()"
  t.wait(5000, require("mented.watch").connected, "the event stream")
  t.seen.before_any_fire = vim.api.nvim_eval_statusline(vim.o.statusline, {}).str

  t.fire(other, "git commit -m 'elsewhere'", "session-elsewhere")
  t.fire(project .. "/src", "git -c commit.gpgsign=false commit -m 'fix: here'", "session-here")
  t.wait(5000, function()
    return mented.statusline() ~= ""
  end, "the statusline to show the fire")
  t.seen.after_fire = vim.api.nvim_eval_statusline(vim.o.statusline, {}).str
  vim.wait(500)
  t.seen.fire_notes = t.new_notes()

  -- In the other project's buffer: its own last fire, from the daemon's log.
  vim.cmd("edit " .. other .. "/notes.txt")
  t.wait(5000, function()
    return mented.statusline() ~= ""
  end, "the other project's last fire")
  t.seen.other_project = mented.statusline()
end
