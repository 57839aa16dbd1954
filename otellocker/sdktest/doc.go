// Package sdktest holds otellocker's tests, which read the recorded spans
// and metrics back through the OpenTelemetry SDK: a module of its own, so
// that otellocker's go.mod requires the OpenTelemetry API alone.
package sdktest
