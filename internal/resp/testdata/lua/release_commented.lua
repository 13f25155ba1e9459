--[[ Release the lock if it is still ours. ]]
if redis.call('GET', KEYS[1]) == ARGV[1] then -- ours
  return redis.call('DEL', KEYS[1])
else
  return 0 -- someone else's, or free
end
