-- A listing far larger than one read of the socket.
return function(t)
  vim.cmd("edit " .. os.getenv("PROJECT") .. "/src/main.c")
  vim.cmd("MentedRules")
  t.wait(10000, function()
    return vim.bo.filetype == "mented"
  end, "the rules buffer")
  t.seen.lines = t.lines()
end
