// Package mcpserversfn builds McpServersFunction: the users' own remote
// MCP servers (/api/mcp-servers), which it connects to (listing their
// tools) and whose secrets it seals and opens with the vault: the one
// function granted the KMS key's GenerateDataKey and Decrypt.
package mcpserversfn

import (
	"context"
	"errors"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/mcpserver"
	"github.com/workflowchat/service/shared/mcpserver/oauthclient"
	"github.com/workflowchat/service/shared/mcpserver/remote"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/usertools"
	"github.com/workflowchat/service/shared/vault"
	"github.com/workflowchat/service/shared/vault/kmskeys"
	"github.com/workflowchat/service/shared/workflow/runs"
)

// McpServers is McpServersFunction.
var McpServers = assembly.Function{
	LogicalID: "McpServersFunction",
	Required:  []string{"SESSIONS_TABLE", "DATA_TABLE", "RATE_LIMITS_TABLE", "VAULT_KMS_KEY"},
	Build:     build,
}

func build(ctx context.Context, cfg config.Config, d assembly.Deps) (*httpapi.Router, error) {
	svc, err := Service(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	return mcpserver.Routes(svc, d.Auth(cfg), mcpserver.Limits{Limiter: d.Limiter(cfg), Connect: cfg.RateLimitMCPServers,
		PublicBaseURL: cfg.PublicBaseURL}), nil
}

// Service returns the MCP server service of the configuration: the Data
// table's servers, the vault (Vault), the SSRF-safe remote client
// (TOOLS_ALLOW_PRIVATE_NETWORKS) and the OAuth client side
// (oauthclient: authorization, tokens, the client metadata document;
// returnTo on ALLOWED_ORIGINS). It fails when the vault cannot be built.
func Service(ctx context.Context, cfg config.Config, d assembly.Deps) (*mcpserver.Service, error) {
	v, err := Vault(ctx, cfg, d)
	if err != nil {
		return nil, err
	}
	st := store.NewMCPServers(d.DB, cfg.DataTable)
	oc := oauthclient.New(oauthclient.Options{Store: st, Vault: v, AllowPrivate: cfg.ToolsAllowPrivateNetworks, Now: d.Now})
	rm := remote.New(cfg.ToolsAllowPrivateNetworks)
	return mcpserver.NewService(mcpserver.Options{Store: st, Vault: v, Audit: d.Audit(cfg),
		Remote: rm, Caller: rm, AllowPrivate: cfg.ToolsAllowPrivateNetworks, Now: d.Now,
		Tokens: oc, OAuth: oc, Document: func(base string) any { return oc.Document(base) }, AllowedOrigins: cfg.AllowedOrigins,
		// A server the callback (or a refresh) leaves connected continues
		// the runs waiting for its authorization: their lease ends, and
		// the sweeper's next pass hands them to the runner (this function
		// invokes none).
		OnConnected: authResumer(cfg, d).Authorized}), nil
}

// Caller returns what calls the users' remote tools for the functions
// that run them (chats, their stream, the runner): the one Service. With
// neither d.VaultKeys nor VAULT_KMS_KEY (which template.yaml gives each
// of them) it is nil: remote tools are listed and offered but a call
// fails TOOLS_UNAVAILABLE, and nothing else changes. It fails as Service
// does.
func Caller(ctx context.Context, cfg config.Config, d assembly.Deps) (usertools.Caller, error) {
	if d.VaultKeys == nil && cfg.VaultKMSKey == "" {
		return nil, nil
	}
	return Service(ctx, cfg, d)
}

// Vault returns the vault over d.VaultKeys or, when nil, the KMS key
// VAULT_KMS_KEY (at KMS_ENDPOINT when set). It fails when neither is
// given or the AWS configuration cannot be loaded.
func Vault(ctx context.Context, cfg config.Config, d assembly.Deps) (*vault.Vault, error) {
	if d.VaultKeys != nil {
		return vault.New(d.VaultKeys, d.Now), nil
	}
	if cfg.VaultKMSKey == "" {
		return nil, errors.New("config: required but not set: VAULT_KMS_KEY")
	}
	keys, err := kmskeys.Open(ctx, cfg.Region, cfg.KMSEndpoint, cfg.VaultKMSKey)
	if err != nil {
		return nil, err
	}
	return vault.New(keys, d.Now), nil
}

// authResumer is what continues the runs waiting for a server's
// authorization from this function: the Data table's runs and wait items.
func authResumer(cfg config.Config, d assembly.Deps) runs.AuthResumer {
	rs := store.NewRuns(d.DB, cfg.DataTable)
	return runs.AuthResumer{Store: rs, AuthWaits: rs, Now: d.Now}
}
