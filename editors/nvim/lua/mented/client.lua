-- Talks to the daemon over its Unix socket on Neovim's own event loop (libuv):
-- nothing here blocks the editor. Each request opens a connection, sends one
-- frame and reads one frame back under a deadline; a subscription keeps its
-- connection and reads event frames until either side closes.
--
-- Callbacks run on the main loop (vim.schedule), so they may use any API.
-- Failures are passed on as a table {code = ..., message = ...}: the daemon's
-- own error codes (docs/protocol.md), or one of
--   not_running  no daemon listens at the socket (no file, or nobody accepting)
--   unreachable  the socket exists but cannot be used (permissions, path too long)
--   timeout      no answer in time
--   protocol     the other end does not speak mented's protocol
--   closed       the daemon closed the connection (e.g. it stopped)
local frame = require("mented.frame")

local uv = vim.uv or vim.loop

local M = {}

local json_encode = (vim.json and vim.json.encode) or vim.fn.json_encode
local json_decode = (vim.json and vim.json.decode) or vim.fn.json_decode

M.DEFAULT_TIMEOUT_MS = 3000

-- Errors of connect() that mean nobody is serving there.
local NOT_RUNNING = { ENOENT = true, ECONNREFUSED = true, ENOTDIR = true, ENOTSOCK = true }

local function failure(code, message)
  return { code = code, message = message }
end

local function connect_failure(path, err)
  local name = tostring(err):match("^(E%u+)") or tostring(err)
  if NOT_RUNNING[name] then
    return failure("not_running", "no mented daemon at " .. path .. " (" .. name .. ")")
  end
  return failure("unreachable", "cannot connect to " .. path .. ": " .. tostring(err))
end

local function close(handle)
  if handle and not handle:is_closing() then
    handle:close()
  end
end

local function stop_and_close(timer)
  if not timer:is_closing() then
    timer:stop()
    timer:close()
  end
end

local function decode(body)
  local ok, message = pcall(json_decode, body)
  if not ok or type(message) ~= "table" then
    return nil, failure("protocol", "the daemon sent something that is not a JSON object")
  end
  if message.type == "error" then
    return nil, failure(tostring(message.code), tostring(message.message))
  end
  return message
end

--- A connection to `path` that sends `message` and hands each frame read to `on_frame`.
---
--- on_frame(message | nil, failure | nil) runs on the main loop for each frame,
--- and once with a failure when the connection fails or ends (`closed`), unless
--- the caller closed it first. Returns a handle with :close().
local function open(path, message, on_frame)
  -- `closed`: the pipe is done with; `cancelled`: the caller wants nothing more.
  -- Frames read just before the end are still delivered, then the end.
  local conn = { closed = false, cancelled = false }
  local pipe = uv.new_pipe(false)
  local decoder = frame.decoder()

  local function finish(err)
    if conn.closed then
      return
    end
    conn.closed = true
    close(pipe)
    if err then
      vim.schedule(function()
        if not conn.cancelled then
          on_frame(nil, err)
        end
      end)
    end
  end

  function conn.close()
    conn.cancelled = true
    if not conn.closed then
      conn.closed = true
      close(pipe)
    end
  end

  local ok, err = pcall(function()
    local started, start_err = pipe:connect(path, function(connect_err)
      if conn.closed then
        return
      end
      if connect_err then
        finish(connect_failure(path, connect_err))
        return
      end
      pipe:write(frame.encode(json_encode(message)))
      pipe:read_start(function(read_err, data)
        if conn.closed then
          return
        end
        if read_err then
          finish(failure("closed", "the connection to mented failed: " .. tostring(read_err)))
        elseif data == nil then
          finish(failure("closed", "mented closed the connection"))
        else
          local bodies, too_large = decoder:feed(data)
          if bodies == nil then
            finish(failure("protocol", "mented sent " .. too_large))
            return
          end
          for _, body in ipairs(bodies) do
            vim.schedule(function()
              if not conn.cancelled then
                on_frame(decode(body))
              end
            end)
          end
        end
      end)
    end)
    if started == nil and start_err then
      error(start_err, 0)
    end
  end)
  if not ok then
    finish(connect_failure(path, err))
  end
  return conn
end

--- Send one request and call `callback(reply, failure)` once, on the main loop.
---
--- Exactly one of `reply` (the decoded reply table) and `failure` is set.
function M.request(path, message, callback, timeout_ms)
  local done = false
  local timer = uv.new_timer()
  local conn
  local function answer(reply, err)
    if done then
      return
    end
    done = true
    stop_and_close(timer)
    conn.close()
    callback(reply, err)
  end
  conn = open(path, message, answer)
  timer:start(timeout_ms or M.DEFAULT_TIMEOUT_MS, 0, function()
    vim.schedule(function()
      answer(nil, failure("timeout", "mented did not answer within " .. (timeout_ms or M.DEFAULT_TIMEOUT_MS) .. " ms"))
    end)
  end)
  return conn
end

--- Subscribe: `handlers.on_subscribed(reply)` once, then `handlers.on_event(event)`
--- for each event frame, then `handlers.on_end(failure)` when it ends (not after
--- :close()). A subscription that is not confirmed within `timeout_ms` ends
--- with a `timeout`. Returns a handle with :close().
function M.subscribe(path, message, handlers, timeout_ms)
  local confirmed = false
  local ended = false
  local timer = uv.new_timer()
  local conn
  local function stop_timer()
    stop_and_close(timer)
  end
  local function fail(err)
    if ended then
      return
    end
    ended = true
    stop_timer()
    conn.close()
    handlers.on_end(err)
  end
  conn = open(path, message, function(msg, err)
    if ended then
      return
    end
    if err then
      fail(err)
    elseif not confirmed then
      if msg.type ~= "subscribed" then
        fail(failure("protocol", "mented answered a subscription with " .. tostring(msg.type)))
        return
      end
      confirmed = true
      stop_timer()
      handlers.on_subscribed(msg)
    elseif msg.type == "event" then
      handlers.on_event(msg)
    end
  end)
  timer:start(timeout_ms or M.DEFAULT_TIMEOUT_MS, 0, function()
    vim.schedule(function()
      if not confirmed then
        fail(failure("timeout", "mented did not confirm the subscription in time"))
      end
    end)
  end)
  return {
    close = function()
      ended = true
      stop_timer()
      conn.close()
    end,
  }
end

return M
