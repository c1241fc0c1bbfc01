-- The daemon's framing: a 4-byte big-endian length, then that many bytes of UTF-8 JSON.
--
-- Written with plain arithmetic: LuaJIT (Lua 5.1) has no string.pack, and Neovim
-- may be built with either. A stream read can end anywhere, so the decoder keeps
-- what it has not used yet and hands back every whole frame a read completed.
local M = {}

-- The daemon refuses larger frames (docs/protocol.md); a header announcing more
-- means the stream is not mented's, and reading on would buffer without end.
M.MAX_FRAME = 4 * 1024 * 1024

--- One frame holding `body` (a string of bytes).
function M.encode(body)
  local n = #body
  return string.char(
    math.floor(n / 16777216) % 256,
    math.floor(n / 65536) % 256,
    math.floor(n / 256) % 256,
    n % 256
  ) .. body
end

local function length_of(header)
  local b1, b2, b3, b4 = header:byte(1, 4)
  return ((b1 * 256 + b2) * 256 + b3) * 256 + b4
end

local Decoder = {}
Decoder.__index = Decoder

--- A decoder for one stream: feed it each chunk read, in order.
function M.decoder()
  return setmetatable({ buffer = "" }, Decoder)
end

--- The bodies of the frames completed by `chunk`, in order.
--- Returns nil and a message when a header announces more than MAX_FRAME bytes.
function Decoder:feed(chunk)
  local buffer = self.buffer .. chunk
  local bodies = {}
  local pos = 1
  while #buffer - pos + 1 >= 4 do
    local length = length_of(buffer:sub(pos, pos + 3))
    if length > M.MAX_FRAME then
      self.buffer = ""
      return nil, string.format("a frame of %d bytes, over the maximum of %d", length, M.MAX_FRAME)
    end
    if #buffer - pos + 1 < 4 + length then
      break
    end
    bodies[#bodies + 1] = buffer:sub(pos + 4, pos + 3 + length)
    pos = pos + 4 + length
  end
  self.buffer = buffer:sub(pos)
  return bodies
end

return M
