package main

import (
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// withWebhookAuth authenticates the kubelet port's callers by client certificate (the API
// server's kubelet client) and authorizes them through the API server, as a kubelet with
// --authorization-mode=Webhook does.
func withWebhookAuth(o *nodeOptions) nodeutil.NodeOpt {
	return func(cfg *nodeutil.NodeConfig) error {
		auth, err := nodeutil.WebhookAuth(cfg.Client, o.name, func(w *nodeutil.WebhookAuthConfig) error {
			var err error
			w.AuthnConfig.ClientCertificateCAContentProvider, err = dynamiccertificates.NewDynamicCAContentFromFile("client-ca", o.clientCA)
			return err
		})
		if err != nil {
			return err
		}
		cfg.Handler = api.InstrumentHandler(nodeutil.WithAuth(auth, cfg.Handler))
		return nil
	}
}
