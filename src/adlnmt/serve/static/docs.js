// Render /openapi.json as a plain list of operations with their request and response schemas (no CDN, no library).
"use strict";

function block(tag, text, cls) {
  const node = document.createElement(tag);
  node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

function resolve(schema, spec) {
  if (schema && schema.$ref) return spec.components.schemas[schema.$ref.split("/").pop()];
  return schema;
}

async function render() {
  const target = document.getElementById("api");
  try {
    const spec = await (await fetch("/openapi.json")).json();
    target.replaceChildren(block("h2", `${spec.info.title} ${spec.info.version}`));
    for (const [path, operations] of Object.entries(spec.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        const box = document.createElement("div");
        box.className = "result";
        box.appendChild(block("h3", `${method.toUpperCase()} ${path}`));
        if (op.description || op.summary) box.appendChild(block("p", op.description || op.summary));
        const body = op.requestBody && op.requestBody.content["application/json"];
        if (body) {
          box.appendChild(block("h4", "request body"));
          box.appendChild(block("pre", JSON.stringify(resolve(body.schema, spec), null, 2)));
        }
        for (const [code, response] of Object.entries(op.responses || {})) {
          const json = response.content && response.content["application/json"];
          const schema = json ? resolve(json.schema, spec) : null;
          box.appendChild(block("h4", `${code}: ${response.description}`));
          if (schema && Object.keys(schema).length) box.appendChild(block("pre", JSON.stringify(schema, null, 2)));
        }
        target.appendChild(box);
      }
    }
  } catch (err) {
    target.replaceChildren(block("p", "cannot load /openapi.json: " + err, "error"));
  }
}

render();
