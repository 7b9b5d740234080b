// Kopf's example 17: validating and mutating admission webhooks, served by the controller,
// which calls these handlers. Throw `AdmissionError` to deny; push to `warnings` to warn.
import * as bosun from "bosun-operator";

bosun.on.startup(({ settings }) => {
  // The controller's own webhook server, with the configurations it keeps under this name.
  settings.admission.server = {};
  settings.admission.managed = "auto.kopf.dev";
}, { id: "config" });

bosun.on.validate("kex", ({ headers, sslpeer, warnings }) => {
  const userAgent = headers["user-agent"] ?? "(unidentified)";
  warnings.push(`Accessing as user-agent: ${userAgent}`);
  if (!sslpeer.subject) {
    warnings.push("SSL peer is not identified.");
  } else {
    const commonNames = (sslpeer.subject[0] ?? []).filter(([key]: [string]) => key === "commonName").map(([, value]: [string, string]) => value);
    warnings.push(commonNames.length ? `SSL peer is ${commonNames[0]}.` : "SSL peer's common name is absent.");
  }
}, { id: "authhook" });

bosun.on.validate("kex", ({ spec, dryrun }) => {
  if (!dryrun && spec.field === "wrong") {
    throw new bosun.AdmissionError("Meh! I don't like it. Change the field.");
  }
}, { id: "validate1" });

bosun.on.validate("kex", () => {
  throw new bosun.AdmissionError("I'm too lazy anyway. Go away!", { code: 555 });
}, { id: "validate2", field: "spec.field", value: "not-allowed" });

bosun.on.validate("kex", ({ spec, subresource, status, warnings }) => {
  if (subresource === "status" && status.field !== spec.field) {
    throw new bosun.AdmissionError("status.field MUST be equal to spec.field!");
  } else if (subresource === undefined && status.field !== spec.field) {
    warnings.push(`Also update status.field to match spec.field: ${JSON.stringify(spec.field)} != ${JSON.stringify(status.field)}`);
  }
}, { id: "validate_subresources", subresources: ["*"] });

bosun.on.mutate("kex", ({ patch }) => {
  patch.spec.injected = 123;
}, { id: "mutate1", labels: { somelabel: "somevalue" } });
