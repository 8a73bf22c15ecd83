// Package rules checks the alerting rules of config/prometheus/alerts.yaml
// with Prometheus' own rule and PromQL parsers: every rule parses and
// validates as Prometheus would load it, every expression names only metrics
// the library exports, and every runbook_url leads to a section of
// docs/advanced/alerts.md.
//
// It is a module of its own (run with GOWORK=off, as make test does): the
// Prometheus module requires newer versions of the Kubernetes and Prometheus
// client libraries than the library is built with, and a test-only
// dependency must not raise them for the library's users.
package rules
