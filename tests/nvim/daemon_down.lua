-- Every command with no daemon: one plain message each, at once, and nothing else.
return function(t)
  local mented = require("mented")
  vim.cmd("edit " .. os.getenv("PROJECT") .. "/src/main.c")
  t.seen.statusline = mented.statusline()
  t.seen.windows_before = #vim.api.nvim_list_wins()
  t.seen.commands = {}
  for _, command in ipairs({
    "MentedRules",
    "MentedAdd ++everywhere git-commit commit messages: single line",
    "MentedAdd git-commit",
    "MentedSupersede 1s8gme8g",
    "MentedSupersede 1s8gme8g a new text",
  }) do
    local since = (vim.uv or vim.loop).hrtime()
    vim.cmd(command)
    local returned_ms = t.elapsed_ms(since)
    table.insert(t.seen.commands, {
      command = command,
      returned_ms = returned_ms,
      notes = t.next_notes("the message for " .. command),
    })
  end
  local since = (vim.uv or vim.loop).hrtime()
  t.seen.completion = mented.complete_add("git", "MentedAdd git", 13)
  t.seen.completion_ms = t.elapsed_ms(since)
  vim.wait(2500) -- the event stream retries meanwhile
  t.seen.notes_later = t.new_notes()
  t.seen.statusline_later = mented.statusline()
  t.seen.windows_after = #vim.api.nvim_list_wins()
end
