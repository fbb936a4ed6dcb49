// Plain JavaScript on purpose: it must run on any Node to explain the requirement on the wrong one.
// npm puts node_modules/.bin first on PATH for scripts, so with `npm ci` done this is the pinned Node 24
// from the `node` devDependency, whatever the machine's own Node is.
const major = Number(process.versions.node.split('.')[0]);
if (major !== 24) {
  console.error(
    `error: NodeDisks runs on Node.js 24 LTS, but this is ${process.version} (${process.execPath}).\n` +
      'Run the project through npm (npm test, npm start, npm run …) after `npm ci`: npm then uses the pinned\n' +
      'Node 24 from node_modules/.bin/node (the "node" devDependency), whatever Node the machine has.',
  );
  process.exit(1);
}
