if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('NOTOWNER the lock is not yours')
end
redis.call('del', KEYS[1])
return redis.status_reply('RELEASED')
