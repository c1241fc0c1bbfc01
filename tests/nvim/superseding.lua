-- Superseding the rule under the cursor (the `s` key), then by handle, then a stale one.
return function(t)
  local old = os.getenv("RULE_HANDLE")
  vim.cmd("edit " .. os.getenv("PROJECT") .. "/src/main.c")
  vim.cmd("MentedRules")
  t.wait(5000, function()
    return vim.bo.filetype == "mented"
  end, "the rules buffer")
  local rules = vim.api.nvim_get_current_buf()
  vim.api.nvim_win_set_cursor(0, { t.find_line("[" .. old .. "]"), 0 })
  vim.api.nvim_feedkeys("s", "x", false)
  t.wait(5000, function()
    return vim.bo.buftype == "acwrite"
  end, "the rule editor")
  local editor = vim.api.nvim_get_current_buf()
  t.seen.editor_name = vim.api.nvim_buf_get_name(editor)
  t.seen.editor_lines = t.lines()
  vim.api.nvim_buf_set_lines(editor, 0, 1, false, { "rebase-merge PRs; never squash" })
  vim.cmd("write")
  t.wait(5000, function()
    return not vim.api.nvim_buf_is_valid(editor)
  end, "the editor to close once saved")
  t.seen.superseded = t.next_notes("the confirmation")
  t.wait(5000, function()
    return table.concat(t.lines(rules), "\n"):find("never squash", 1, true) ~= nil
  end, "the rules buffer to show the new version")
  t.seen.rules_after = t.lines(rules)

  local new = t.seen.superseded[1]:match("superseded by %[(%w+)%]")
  t.seen.handles_completed = require("mented").complete_supersede("", "MentedSupersede ", 16)
  vim.cmd("MentedSupersede " .. new .. " rebase-merge PRs, keep the branch")
  t.seen.by_handle = t.next_notes("the second confirmation")

  vim.cmd("MentedSupersede " .. old .. " a third opinion")
  t.seen.stale = t.next_notes("the conflict")

  vim.api.nvim_set_current_buf(rules)
  vim.api.nvim_win_set_cursor(0, { 1, 0 }) -- the title: no rule there
  vim.cmd("MentedSupersede")
  t.seen.no_rule_here = t.next_notes("the hint")
end
