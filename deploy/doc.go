// Package deploy holds what runs paygw beside the code: Prometheus's alert rules and their
// tests, the Grafana dashboard, and (at the repository's root) docker-compose.yml. It has no
// code; its tests check those files against what the code exports.
package deploy
