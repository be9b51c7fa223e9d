// Node.js ws clients: node node_peer.js URL OPTIONS_JSON NAME...
// OPTIONS_JSON: the options of ws's WebSocket constructor, e.g. {} (its defaults: it offers
// "permessage-deflate; client_max_window_bits") or {"perMessageDeflate": {...}}.
// Prints the close codes (JSON) when every connection has closed.
"use strict";
const WebSocket = require("ws");
const { runPeers } = require("./peer.js");

const [url, options, ...names] = process.argv.slice(2);
const settings = JSON.parse(options);
runPeers(url, names, (address) => new WebSocket(address, settings), console.error)
  .then((codes) => console.log(JSON.stringify(codes)));
