//! The message roles of OpenAI's two formats (Chat Completions and Responses), read from their
//! names in one place: `developer` is the newer name of `system`, and both give a system turn.
//! Responses has no `tool` role (its results are items of their own), so its readers refuse
//! [`Role::Tool`] as an unknown role.

use cutctx_model::Role;

/// The turn role an OpenAI message's `role` names; `None` for any other name.
pub(crate) fn openai_role(name: &str) -> Option<Role> {
    match name {
        "system" | "developer" => Some(Role::System),
        "user" => Some(Role::User),
        "assistant" => Some(Role::Assistant),
        "tool" => Some(Role::Tool),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_its_role_and_nothing_else_is_one() {
        let named = [
            ("system", Role::System),
            ("developer", Role::System),
            ("user", Role::User),
            ("assistant", Role::Assistant),
            ("tool", Role::Tool),
        ];
        for (name, role) in named {
            assert_eq!(openai_role(name), Some(role), "{name}");
        }
        for name in ["", "System", "function", "model", "critic"] {
            assert_eq!(openai_role(name), None, "{name}");
        }
    }
}
