// Package onboard makes a cluster a member of a fleet run by the kubeconfig
// provider (providers/kubeconfig), the step a platform admin takes once per
// member and again to rotate its credentials.
//
// Cluster creates, in the member, a ServiceAccount with the RBAC rules it is
// given (a ClusterRole and ClusterRoleBinding), requests a token for it bound
// to a Secret next to the ServiceAccount, and writes on the host the labelled
// Secret holding a kubeconfig with that token, which the provider then
// engages:
//
//	secret, err := onboard.Cluster(ctx, memberConfig, hostClient, onboard.Options{
//		ClusterName: "eu-west-1",
//		Namespace:   "fleet-system",
//		Rules:       rules,
//	})
//
// The token is written only to the Secret; it is never returned or logged.
// When a step fails after the token request, what this call created in the
// member is deleted, which revokes the token.
//
// The kubeconfig-secret command (cmd/kubeconfig-secret) does the same from
// the command line.
package onboard
