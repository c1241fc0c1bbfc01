-- The daemon stops and comes back: the statusline empties, then follows again.
return function(t)
  local mented, watch = require("mented"), require("mented.watch")
  local project = os.getenv("PROJECT")
  vim.cmd("edit " .. project .. "/src/main.c")
  mented.statusline()
  t.wait(5000, watch.connected, "the event stream")
  t.fire(project, "git -c commit.gpgsign=false commit -m x")
  t.wait(5000, function()
    return mented.statusline() ~= ""
  end, "the statusline to show the fire")
  t.seen.before = mented.statusline()

  local socket = require("mented.daemon").socket()
  require("mented.client").request(socket, { type = "shutdown" }, function() end)
  t.wait(10000, function()
    return not watch.connected()
  end, "the plugin to see the daemon go")
  t.seen.while_down = mented.statusline()
  vim.wait(2000) -- it retries meanwhile
  t.seen.notes_while_down = t.new_notes()

  -- As a service manager would: a new daemon on the same socket and data.
  local job = vim.fn.jobstart({ os.getenv("MENTED_TEST_PYTHON"), "-m", "mented.daemon" })
  local since = (vim.uv or vim.loop).hrtime()
  t.wait(30000, watch.connected, "the plugin to reconnect")
  t.seen.reconnect_ms = t.elapsed_ms(since)
  t.seen.right_after = mented.statusline()
  t.fire(project, "git push origin main")
  t.wait(5000, function()
    return mented.statusline():find("git-push", 1, true) ~= nil
  end, "the statusline to show the new fire")
  t.seen.after = mented.statusline()

  require("mented.client").request(socket, { type = "shutdown" }, function() end)
  t.seen.stopped = vim.fn.jobwait({ job }, 15000)[1]
end
