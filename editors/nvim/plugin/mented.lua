-- The commands and autocommands of mented.nvim. Everything else loads on first use.
if vim.g.loaded_mented then
  return
end
vim.g.loaded_mented = true

if vim.fn.has("nvim-0.7") == 0 then
  vim.api.nvim_echo({ { "mented.nvim needs Neovim 0.7 or newer", "WarningMsg" } }, true, {})
  return
end

local function mented()
  return require("mented")
end

vim.api.nvim_create_user_command("MentedRules", function()
  mented().rules()
end, { nargs = 0, desc = "mented: the rules that apply to this project" })

vim.api.nvim_create_user_command("MentedAdd", function(command)
  mented().add(command.args)
end, {
  nargs = "*",
  complete = function(...)
    return mented().complete_add(...)
  end,
  desc = "mented: add a rule for an action ([++project|++everywhere] {action} [text])",
})

vim.api.nvim_create_user_command("MentedSupersede", function(command)
  mented().supersede(command.args)
end, {
  nargs = "*",
  complete = function(...)
    return mented().complete_supersede(...)
  end,
  desc = "mented: replace a rule ([handle [text]]; default: the rule under the cursor)",
})

local group = vim.api.nvim_create_augroup("mented", { clear = true })
vim.api.nvim_create_autocmd({ "BufEnter", "DirChanged" }, {
  group = group,
  callback = function()
    if package.loaded["mented"] then
      mented().on_enter()
    end
  end,
})
