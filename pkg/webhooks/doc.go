// Package webhooks defaults and validates Dockyard's kinds when the API server admits them.
package webhooks
