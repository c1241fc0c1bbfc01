-- :MentedAdd with the text inline, with the rule editor, and with a typo.
return function(t)
  local mented = require("mented")
  vim.cmd("edit " .. os.getenv("PROJECT") .. "/src/main.c")
  t.seen.actions_completed = mented.complete_add("git-p", "MentedAdd git-p", 15)
  t.seen.flags_completed = mented.complete_add("++", "MentedAdd ++", 12)
  t.seen.action_after_flag = mented.complete_add("pr-c", "MentedAdd ++project pr-c", 25)
  t.seen.text_not_completed = mented.complete_add("", "MentedAdd git-commit ", 21)

  vim.cmd("MentedAdd ++project git-commit commit messages: single line, no emojis")
  t.seen.inline = t.next_notes("the inline rule's confirmation")

  local asked
  vim.ui.select = function(items, options, on_choice)
    asked = { prompt = options.prompt, items = vim.tbl_map(options.format_item, items) }
    on_choice("everywhere")
  end
  vim.cmd("MentedAdd git-push")
  t.wait(5000, function()
    return vim.bo.buftype == "acwrite"
  end, "the rule editor")
  local editor = vim.api.nvim_get_current_buf()
  t.seen.asked = asked
  t.seen.editor_name = vim.api.nvim_buf_get_name(editor)
  t.seen.editor_lines = t.lines()
  vim.api.nvim_buf_set_lines(editor, 0, 1, false, { "never force-push", "to main" })
  vim.cmd("write")
  t.wait(5000, function()
    return not vim.api.nvim_buf_is_valid(editor)
  end, "the editor to close once saved")
  t.seen.from_editor = t.next_notes("the edited rule's confirmation")
  t.seen.windows_after = #vim.api.nvim_list_wins()

  vim.cmd("MentedAdd ++everywhere git-comit oops")
  t.seen.typo = t.next_notes("the typo's warning")
end
