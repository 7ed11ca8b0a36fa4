//! Clients of the embedded API server, from the kubeconfig it wrote.

use std::path::Path;

/// A client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("reading the kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("using the kubeconfig");
    kube::Client::try_from(config).expect("building a client")
}
