//! Impersonation, as kube-apiserver's filter reads it: `Impersonate-User` (with
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>`, as `kubectl --as
//! bob --as-group dev` sends them) makes a request that user's. Each part must be allowed to
//! the requester with the verb `impersonate`: on `users` (or the `serviceaccounts` a
//! `system:serviceaccount:NS:NAME` user is), `groups`, `uids` and `userextras/<key>` of
//! `authentication.k8s.io`, each by its name.

use std::collections::BTreeMap;

use actix_web::http::header::HeaderMap;

use super::attributes::Attributes;
use super::{
    service_account_groups, service_account_of, UserInfo, ANONYMOUS, AUTHENTICATED, UNAUTHENTICATED,
};
use crate::error::HttpError;

/// An impersonating request: the user it asks to be, and what the requester must be allowed
/// for that.
#[derive(Debug)]
pub struct Impersonation {
    pub user: UserInfo,
    pub checks: Vec<Attributes>,
}

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// Whether `headers` ask for any impersonation (`Impersonate-*`).
pub fn asked(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| name.as_str().starts_with("impersonate-"))
}

/// The impersonation `headers` ask for, if any; 400 when they ask for groups, a uid or extras
/// without a user.
pub fn requested(headers: &HeaderMap) -> Result<Option<Impersonation>, HttpError> {
    let values = |name: &str| -> Vec<String> {
        let all = headers.get_all(name).filter_map(|v| v.to_str().ok());
        all.map(str::to_string).collect()
    };
    let mut groups = values(GROUP);
    let uid = values(UID).into_iter().next().filter(|uid| !uid.is_empty());
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers.iter() {
        let Some(key) = name.as_str().strip_prefix(EXTRA) else { continue };
        let key = percent_encoding::percent_decode_str(key).decode_utf8_lossy().into_owned();
        extra.entry(key).or_default().extend(value.to_str().ok().map(str::to_string));
    }
    // An empty user is none, as Kubernetes reads the header.
    let Some(name) = values(USER).into_iter().next().filter(|name| !name.is_empty()) else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(None);
        }
        return Err(HttpError::BadRequest(
            "requested impersonation of groups, a uid or extras without impersonating a user"
                .into(),
        ));
    };
    let mut checks = Vec::new();
    let asked = |resource: &str, group: &str, name: &str| Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        name: name.into(),
        ..Attributes::default()
    };
    match service_account_of(&name) {
        Some((namespace, account)) => {
            let mut check = asked("serviceaccounts", "", account);
            check.namespace = namespace.into();
            checks.push(check);
            // A service account's groups follow from its name when none are asked for.
            if groups.is_empty() {
                groups = service_account_groups(namespace);
            }
        }
        None => checks.push(asked("users", "", &name)),
    }
    checks.extend(values(GROUP).iter().map(|group| asked("groups", "", group)));
    const AUTHENTICATION: &str = "authentication.k8s.io";
    for (key, values) in &extra {
        for value in values {
            let mut check = asked("userextras", AUTHENTICATION, value);
            check.subresource = key.clone();
            checks.push(check);
        }
    }
    if let Some(uid) = &uid {
        checks.push(asked("uids", AUTHENTICATION, uid));
    }
    // Every user but the anonymous one is authenticated, unless a group asked says not;
    // the anonymous one is not.
    let marker = if name == ANONYMOUS { UNAUTHENTICATED } else { AUTHENTICATED };
    if !groups.iter().any(|g| g == marker || (name != ANONYMOUS && g == UNAUTHENTICATED)) {
        groups.push(marker.into());
    }
    let user = UserInfo { name, uid: uid.unwrap_or_default(), groups, extra };
    Ok(Some(Impersonation { user, checks }))
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            let name = HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes()).unwrap();
            map.append(name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn checked(impersonation: &Impersonation) -> Vec<String> {
        let checks = impersonation.checks.iter();
        checks
            .map(|a| {
                let resource = if a.subresource.is_empty() {
                    a.resource.clone()
                } else {
                    format!("{}/{}", a.resource, a.subresource)
                };
                format!("{} {}:{resource} {}/{}", a.verb, a.api_group, a.namespace, a.name)
            })
            .collect()
    }

    #[test]
    fn each_part_asked_for_is_a_check_and_the_user_gets_kubernetes_groups() {
        assert!(requested(&headers(&[])).unwrap().is_none());
        assert!(requested(&headers(&[("Impersonate-User", "")])).unwrap().is_none());
        let no_uid = requested(&headers(&[("Impersonate-User", "bob"), ("Impersonate-Uid", "")]));
        assert_eq!(checked(&no_uid.unwrap().unwrap()), ["impersonate :users /bob"]);
        let bob = requested(&headers(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Uid", "u1"),
            ("Impersonate-Extra-Scopes%2Fa", "x"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            checked(&bob),
            [
                "impersonate :users /bob",
                "impersonate :groups /dev",
                "impersonate :groups /ops",
                "impersonate authentication.k8s.io:userextras/scopes/a /x",
                "impersonate authentication.k8s.io:uids /u1",
            ]
        );
        assert_eq!(bob.user.groups, ["dev", "ops", AUTHENTICATED]);
        assert_eq!(
            (bob.user.uid.as_str(), &bob.user.extra["scopes/a"]),
            ("u1", &vec!["x".to_string()])
        );

        let robot =
            requested(&headers(&[("Impersonate-User", "system:serviceaccount:team:robot")]))
                .unwrap()
                .unwrap();
        assert_eq!(checked(&robot), ["impersonate :serviceaccounts team/robot"]);
        assert_eq!(
            robot.user.groups,
            ["system:serviceaccounts", "system:serviceaccounts:team", AUTHENTICATED]
        );

        let anonymous = requested(&headers(&[("Impersonate-User", ANONYMOUS)])).unwrap().unwrap();
        assert_eq!(anonymous.user.groups, [UNAUTHENTICATED]);
        let unauthenticated = requested(&headers(&[
            ("Impersonate-User", "carol"),
            ("Impersonate-Group", UNAUTHENTICATED),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(unauthenticated.user.groups, [UNAUTHENTICATED]);

        let groups_alone = requested(&headers(&[("Impersonate-Group", "dev")])).unwrap_err();
        assert!(matches!(groups_alone, HttpError::BadRequest(_)), "{groups_alone}");
    }
}
