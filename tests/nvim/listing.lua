-- :MentedRules from a file deep in a git project; then a rule added from a terminal.
return function(t)
  vim.cmd("edit " .. os.getenv("PROJECT") .. "/src/deep/main.c")
  vim.cmd("MentedRules")
  t.wait(5000, function()
    return vim.bo.filetype == "mented"
  end, "the rules buffer")
  local rules = vim.api.nvim_get_current_buf()
  t.seen.name = vim.api.nvim_buf_get_name(rules)
  t.seen.lines = t.lines()
  t.seen.modifiable = vim.bo.modifiable

  -- A team rule is kept in the project's files: superseding it says where.
  vim.api.nvim_win_set_cursor(0, { t.find_line("rules live in the repo"), 0 })
  vim.cmd("MentedSupersede")
  t.seen.team_rule_supersede = t.next_notes("the team rule's hint")

  -- A change made elsewhere shows up without asking.
  t.wait(5000, require("mented.watch").connected, "the event stream")
  t.mentectl("rule", "add", "git-push", "push with --force-with-lease only")
  t.wait(5000, function()
    return t.lines(rules)[1]:find("5 rules", 1, true) ~= nil
  end, "the rules buffer to show the new rule")
  t.seen.after_terminal = t.lines(rules)

  -- :MentedRules again, from the rules buffer: the same buffer, the same project.
  vim.cmd("MentedRules")
  vim.wait(300)
  t.seen.buffers_named_rules = #vim.tbl_filter(function(buf)
    return vim.api.nvim_buf_get_name(buf):find("mented://rules", 1, true) ~= nil
  end, vim.api.nvim_list_bufs())
end
