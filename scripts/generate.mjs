// `npm run generate`: lint the contract and regenerate gen/ from proto/, offline.
import { execFileSync } from "node:child_process";
import { bufPath } from "./buf.mjs";
import { writeProtoDeps } from "./proto-deps.mjs";

writeProtoDeps(".proto-deps");
const buf = (...args) => execFileSync(bufPath(), args, { stdio: "inherit" });
buf("format", "--write", "proto");
buf("lint");
buf("generate");
// A descriptor image of the API and its imports, for clients that need the
// schema without a checkout of the protos (`buf curl --schema gen/asor.binpb`).
buf("build", ".", "--path", "proto/asor", "--output", "gen/asor.binpb");
// The OpenAPI document of the REST surface, from that image (it keeps the
// proto comments): gen/openapi.json, served at /openapi.json.
execFileSync(process.execPath, ["--import", "tsx", "scripts/openapi.ts"], { stdio: "inherit" });
