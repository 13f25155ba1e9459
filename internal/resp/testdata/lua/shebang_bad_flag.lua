#!lua flags=no-such-flag
return 1
