-- The framing on its own: lengths written big-endian by hand, bodies found in
-- reads cut anywhere, a header over the maximum refused.
return function(t)
  local frame = require("mented.frame")
  t.seen.header_0 = { frame.encode(""):byte(1, 4) }
  t.seen.header_70000 = { frame.encode(string.rep("x", 70000)):byte(1, 4) }
  t.seen.header_16909060 = { frame.encode(string.rep("x", 16909060)):byte(1, 4) }

  local a, b = frame.encode('{"a":1}'), frame.encode('{"b":"\195\169"}')
  local stream = a .. frame.encode("") .. b
  local one_byte_at_a_time = {}
  local decoder = frame.decoder()
  for i = 1, #stream do
    for _, body in ipairs(decoder:feed(stream:sub(i, i))) do
      one_byte_at_a_time[#one_byte_at_a_time + 1] = body
    end
  end
  t.seen.one_byte_at_a_time = one_byte_at_a_time

  decoder = frame.decoder()
  t.seen.two_and_a_half = decoder:feed(a .. b .. a:sub(1, 6))
  t.seen.the_rest = decoder:feed(a:sub(7))

  local bodies, err = frame.decoder():feed(string.char(0, 0x40, 0, 1))
  t.seen.over_the_maximum = { refused = bodies == nil, message = err }
  t.seen.at_the_maximum_waits = #frame.decoder():feed(string.char(0, 0x40, 0, 0) .. "partial")
end
