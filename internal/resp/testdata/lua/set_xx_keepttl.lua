-- setups: mine free forever
return {redis.call('set', KEYS[1], ARGV[1], 'XX', 'KEEPTTL'), redis.call('get', KEYS[1])}
