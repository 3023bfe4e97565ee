// Validates every document of the YAML files given against the Kubernetes API's schema
// (npm kubernetes-models: its classes check a manifest with the API's OpenAPI schema).
//   K8S_NODE_MODULES=DIR node check_manifests.mjs FILE.yaml...
// exit 0: all valid; 1: the first error, printed.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
const modules = process.env.K8S_NODE_MODULES;
const load = (p) => import(pathToFileURL(path.join(modules, p)).href);
const yaml = (await load('js-yaml/dist/js-yaml.mjs')).default;
const kinds = {
  'v1/Secret': 'v1/Secret.js',
  'v1/PersistentVolumeClaim': 'v1/PersistentVolumeClaim.js',
  'v1/ConfigMap': 'v1/ConfigMap.js',
  'v1/Service': 'v1/Service.js',
  'batch/v1/Job': 'batch/v1/Job.js',
};
let n = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of yaml.loadAll(fs.readFileSync(file, 'utf8'))) {
    if (doc === null) continue;
    const key = `${doc.apiVersion}/${doc.kind}`;
    if (!kinds[key]) { console.error(`${file}: no schema here for ${key}`); process.exit(1); }
    const Model = (await load(path.join('kubernetes-models', kinds[key])))[doc.kind];
    try {
      new Model(doc).validate();
    } catch (e) {
      console.error(`${file}: ${key} ${doc.metadata && doc.metadata.name}: ${e.message}`);
      process.exit(1);
    }
    console.log(`${file}: ${key} ${doc.metadata.name}: valid`);
    ++n;
  }
}
if (n === 0) { console.error('no manifest checked'); process.exit(1); }
