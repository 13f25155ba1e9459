if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pttl', KEYS[1]) > 0 or redis.call('pttl', KEYS[1]) == -1
end
return -3
