// Step of `npm run generate`: writes gen/openapi.json, the OpenAPI document of
// the REST surface, from the descriptor image that `buf build` has just made.
import { readFileSync, writeFileSync } from "node:fs";
import { parseConfig } from "../src/config.js";
import { formatOpenApiDocument } from "../src/surfaces/rest/openapi/openapi-document.js";
import { registryOpenApiDocument } from "../src/surfaces/rest/openapi/registry-openapi.js";

writeFileSync(
  "gen/openapi.json",
  formatOpenApiDocument(registryOpenApiDocument(readFileSync("gen/asor.binpb"), parseConfig({}).adminDomain)),
);
