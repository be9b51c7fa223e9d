// A WebSocket test peer for tests/integrations/test_foreign_peers.py: the same code runs in
// Node.js (the `ws` package, through its browser-style API; node_peer.js) and in Chromium
// (page.html). Each connection records every message it receives (kind, size, SHA-256, in
// order) and obeys three text messages from the server:
//   "__join__ NAME"  open one more connection, named NAME (a late joiner);
//   "__report__"     send the record as JSON (the server closes the connection after);
//   "__close__"      send the record, then close the connection (1000) itself.
"use strict";

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

// Open a connection per name to `base` + "?name=" + name with connect(url); resolves when
// every connection (late joiners included) has closed, with their close codes by name.
function runPeers(base, names, connect, log) {
  const encoder = new TextEncoder();
  const codes = {};
  let open = 0;
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });

  function start(name) {
    open += 1;
    const ws = connect(base + "?name=" + encodeURIComponent(name));
    ws.binaryType = "arraybuffer";
    const records = []; // promises of [kind, size, sha256], in the order received
    ws.onmessage = (event) => {
      const text = typeof event.data === "string";
      const bytes = text ? encoder.encode(event.data) : new Uint8Array(event.data);
      records.push(crypto.subtle.digest("SHA-256", bytes)
        .then((digest) => [text ? "text" : "binary", bytes.length, hex(digest)]));
      if (!text) return;
      if (event.data.startsWith("__join__ ")) {
        start(event.data.slice("__join__ ".length));
      } else if (event.data === "__report__" || event.data === "__close__") {
        const leaving = event.data === "__close__";
        Promise.all(records).then((messages) => {
          ws.send(JSON.stringify({ name, extensions: ws.extensions, messages }));
          if (leaving) ws.close(1000, "leaving");
        });
      }
    };
    ws.onerror = (event) => log(name + ": error: " + (event.message || event.type));
    ws.onclose = (event) => {
      codes[name] = event.code;
      open -= 1;
      if (open === 0) finish(codes);
    };
  }

  names.forEach(start);
  return finished;
}

if (typeof module !== "undefined") module.exports = { runPeers };
