// Asks the memcached server at process.argv[2] for its version with npm's
// memcached client and prints what the client made of it. A version the
// client cannot parse throws inside its socket handler and kills node.
const Memcached = require("memcached");
const mc = new Memcached(process.argv[2], { retries: 0, timeout: 5000 });
mc.version((err, versions) => {
  if (err) {
    console.log("error: " + err);
    process.exit(1);
  }
  const v = versions[0];
  console.log(`version ${v.version} major ${v.major} minor ${v.minor} bugfix ${v.bugfix}`);
  mc.end();
});
