// A webhook receiver for stdwebhooks_test.go that is not ours: the Standard
// Webhooks library from npm (standardwebhooks, pinned in .ci/npm) verifies
// every delivery, and its verdict is the answer: 204 when verify() accepts
// the delivery, 400 when it throws.
//
//   node stdwebhooks-receiver.mjs NODE_MODULES_DIR
//
// It listens on 127.0.0.1:0 and prints JSON lines on stdout:
//   {"port":N}                     once listening;
//   {"secret":PATH}                after reading {"path":PATH,"secret":"whsec_…"}
//                                  on stdin: deliveries to PATH are verified
//                                  with that secret from then on;
//   {"path","id","timestamp","verified","type","body_timestamp"} or {…,"verified":false,
//   "error_name","error"}           for each delivery, before answering it.
// It exits when stdin closes.

import { createServer } from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";

const require = createRequire(import.meta.url);
const { Webhook } = require(join(process.argv[2], "standardwebhooks"));

const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

const verifiers = new Map();
createInterface({ input: process.stdin })
  .on("line", (line) => {
    const { path, secret } = JSON.parse(line);
    verifiers.set(path, new Webhook(secret));
    print({ secret: path });
  })
  .on("close", () => process.exit(0));

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    // The exact bytes received: verify() signs what it is given.
    const body = Buffer.concat(chunks);
    const line = {
      path: req.url,
      id: req.headers["webhook-id"] ?? "",
      timestamp: req.headers["webhook-timestamp"] ?? "",
      verified: false,
    };
    try {
      const wh = verifiers.get(req.url);
      if (!wh) {
        throw new Error(`no secret for ${req.url}`);
      }
      const payload = wh.verify(body, req.headers);
      line.verified = true;
      line.type = payload.type;
      line.body_timestamp = payload.timestamp;
    } catch (err) {
      line.error_name = err.name;
      line.error = err.message;
    }
    print(line);
    res.writeHead(line.verified ? 204 : 400).end();
  });
});
server.listen(0, "127.0.0.1", () => print({ port: server.address().port }));
