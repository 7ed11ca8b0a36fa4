//! How Kubernetes names a node's identity: user `system:node:NAME` in group `system:nodes`.

/// The prefix of a node's user name.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The group every node identity belongs to.
pub const NODES_GROUP: &str = "system:nodes";

/// The user name of node `node`.
pub fn node_user(node: &str) -> String {
    format!("{NODE_USER_PREFIX}{node}")
}

/// The node a user name belongs to, when it is a node identity with a non-empty name.
pub fn node_of_user(user: &str) -> Option<&str> {
    user.strip_prefix(NODE_USER_PREFIX)
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_users() {
        assert_eq!(node_user("n1"), "system:node:n1");
        assert_eq!(node_of_user(&node_user("n1")), Some("n1"));
        assert_eq!(node_of_user("system:node:"), None);
        assert_eq!(node_of_user("system:serviceaccount:kube-system:x"), None);
    }
}
