import { type DescMethod, type DescService, getOption } from "@bufbuild/protobuf";
import { http } from "../../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";

/** A segment of a path template: a literal, or a variable naming a request field. */
export type Segment = { readonly literal: string } | { readonly variable: string };

/** One REST binding of an RPC. */
export interface RestRoute {
  readonly method: DescMethod;
  readonly verb: string;
  readonly template: string;
  readonly segments: readonly Segment[];
  /** "" (no body), "*" (the whole request) or the proto name of the body field. */
  readonly body: string;
}

function parseTemplate(template: string, method: DescMethod): Segment[] {
  if (!template.startsWith("/")) throw new Error(`${method.name}: path template "${template}" must start with "/"`);
  return template
    .slice(1)
    .split("/")
    .map((part) => {
      const variable = /^\{([a-z_][a-z0-9_]*)(?:=\*)?\}$/.exec(part);
      if (variable?.[1] !== undefined) {
        const name = variable[1];
        const field = method.input.fields.find((f) => f.name === name);
        if (field === undefined || field.fieldKind !== "scalar") {
          throw new Error(`${method.name}: path variable {${name}} is not a scalar field of ${method.input.typeName}`);
        }
        return { variable: name };
      }
      if (part === "" || /[{}*]/.test(part))
        throw new Error(`${method.name}: unsupported segment "${part}" in "${template}"`);
      return { literal: part };
    });
}

function bindingOf(rule: HttpRule, method: DescMethod): Omit<RestRoute, "segments"> & { segments: Segment[] } {
  const { case: verb, value } = rule.pattern;
  if (verb === undefined || verb === "custom")
    throw new Error(`${method.name}: unsupported http rule ${verb ?? "(none)"}`);
  if (rule.body !== "" && rule.body !== "*" && !method.input.fields.some((f) => f.name === rule.body)) {
    throw new Error(`${method.name}: body "${rule.body}" is not a field of ${method.input.typeName}`);
  }
  return { method, verb: verb.toUpperCase(), template: value, segments: parseTemplate(value, method), body: rule.body };
}

/**
 * Every REST binding of the services' `google.api.http` rules, checked at
 * start-up: a malformed template, an unknown field or two bindings of the same
 * verb and template stop the service from starting.
 */
export function buildRouteTable(services: readonly DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  const seen = new Map<string, string>();
  for (const service of services) {
    for (const method of service.methods) {
      const rule = getOption(method, http);
      for (const binding of [rule, ...rule.additionalBindings]) {
        if (binding.pattern.case === undefined) continue;
        const route = bindingOf(binding, method);
        const shape = `${route.verb} ${route.segments.map((s) => ("literal" in s ? s.literal : "{}")).join("/")}`;
        const other = seen.get(shape);
        if (other !== undefined)
          throw new Error(`${method.name} and ${other} both bind ${route.verb} ${route.template}`);
        seen.set(shape, method.name);
        routes.push(route);
      }
    }
  }
  return routes;
}

/** The variables of `route` in `pathname`, or undefined when it does not match. */
export function matchRoute(route: RestRoute, parts: readonly string[]): Map<string, string> | undefined {
  if (parts.length !== route.segments.length) return undefined;
  const vars = new Map<string, string>();
  for (let i = 0; i < parts.length; i++) {
    const segment = route.segments[i] as Segment;
    const part = parts[i] as string;
    if ("literal" in segment) {
      if (segment.literal !== part) return undefined;
    } else {
      if (part === "") return undefined;
      vars.set(segment.variable, part);
    }
  }
  return vars;
}

/**
 * Whether a route's calls create: a POST with a body. A POST without one is an action on what its path names (a
 * probe, issue 44), answered 200 like a read.
 */
export function createsOf(route: { readonly verb: string; readonly body: string }): boolean {
  return route.verb === "POST" && route.body !== "";
}
