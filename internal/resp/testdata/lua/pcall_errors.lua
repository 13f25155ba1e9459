-- What redis.pcall gives a script for each error, turned into strings.
local out = {}
for i, args in ipairs({{'get'}, {'nosuch', KEYS[1]}, {'set', KEYS[1], ARGV[1], 'PX', 'x'}, {'pexpire', KEYS[1]}}) do
  local r = redis.pcall(unpack(args))
  out[i] = type(r) .. ':' .. tostring(r.err)
end
return out
