//! User management statements (`CREATE USER`, `GRANT`, `SHOW USERS`, ...) run against the
//! server's user store (`sundial_auth::Users`).
//!
//! The caller's right to run them is checked before (see `access`); here they only run. Every
//! change the store makes is on disk before it returns, and it may derive a password verifier
//! (deliberately slow), so changes run on the blocking pool. Credentials a statement creates
//! (a REST token, an ILP key) are in its one result row and nowhere else: they cannot be shown
//! again.

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use sundial_auth::Users;
use sundial_sql::{TokenType, UserCommand};

use crate::access::role;
use crate::error::{QueryError, Result};

/// What a user statement answers: a row, or its command tag.
pub(crate) enum Answer {
    Rows(RecordBatch),
    Done(&'static str),
}

/// The result columns of `command`, for those that return rows.
pub(crate) fn schema(command: &UserCommand) -> Option<SchemaRef> {
    match command {
        UserCommand::Show => Some(show_schema()),
        UserCommand::CreateToken { token, .. } => Some(token_schema(*token)),
        _ => None,
    }
}

fn show_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("role", DataType::Utf8, true),
        Field::new("password", DataType::Boolean, false),
        Field::new("rest_tokens", DataType::Int64, false),
        Field::new("ilp_key", DataType::Boolean, false),
        Field::new("builtin", DataType::Boolean, false),
    ]))
}

fn token_schema(token: TokenType) -> SchemaRef {
    let names: &[&str] = match token {
        TokenType::Rest => &["token"],
        TokenType::Jwk => &["key_id", "private_key", "public_key_x", "public_key_y"],
    };
    Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    ))
}

/// Runs `command` against `users` (`None`: this engine has no store).
pub(crate) async fn run(users: Option<Arc<Users>>, command: UserCommand) -> Result<Answer> {
    let Some(users) = users else {
        return Err(QueryError::NotSupported(format!(
            "{}: users are managed by a Sundial server (sundial serve); this engine has no \
             user store",
            command.tag()
        )));
    };
    let tag = command.tag();
    tokio::task::spawn_blocking(move || run_now(&users, command, tag))
        .await
        .map_err(|e| crate::error::internal(format!("a user management task failed: {e}")))?
}

fn run_now(users: &Users, command: UserCommand, tag: &'static str) -> Result<Answer> {
    match command {
        UserCommand::Create {
            name,
            password,
            if_not_exists,
        } => users.create_user(&name, password.as_ref().map(|p| p.expose()), if_not_exists)?,
        UserCommand::SetPassword { name, password } => {
            users.set_password(&name, password.as_ref().map(|p| p.expose()))?
        }
        UserCommand::CreateToken { name, token } => {
            let values = match token {
                TokenType::Rest => vec![users.create_rest_token(&name)?],
                TokenType::Jwk => {
                    let key = users.create_ilp_key(&name)?;
                    vec![key.key_id, key.private_d, key.public_x, key.public_y]
                }
            };
            let columns = values
                .into_iter()
                .map(|v| Arc::new(StringArray::from(vec![v])) as _)
                .collect();
            return Ok(Answer::Rows(RecordBatch::try_new(
                token_schema(token),
                columns,
            )?));
        }
        UserCommand::DropToken { name, token } => match token {
            TokenType::Rest => users.drop_rest_tokens(&name)?,
            TokenType::Jwk => users.drop_ilp_key(&name)?,
        },
        UserCommand::Grant { name, role: r } => users.grant(&name, role(r))?,
        UserCommand::Revoke { name, role: r } => users.revoke(&name, role(r))?,
        UserCommand::Drop { name, if_exists } => users.drop_user(&name, if_exists)?,
        UserCommand::Show => return Ok(Answer::Rows(show(users)?)),
    }
    Ok(Answer::Done(tag))
}

/// `SHOW USERS`: one row per user, by name.
fn show(users: &Users) -> Result<RecordBatch> {
    let mut list = users.list();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = list.iter().map(|u| u.name.as_str()).collect();
    let roles: Vec<Option<&str>> = list.iter().map(|u| u.role.map(|r| r.name())).collect();
    let passwords: Vec<bool> = list.iter().map(|u| u.password).collect();
    let tokens: Vec<i64> = list
        .iter()
        .map(|u| i64::try_from(u.rest_tokens).unwrap_or(i64::MAX))
        .collect();
    let ilp: Vec<bool> = list.iter().map(|u| u.ilp_key).collect();
    let builtin: Vec<bool> = list.iter().map(|u| u.builtin).collect();
    Ok(RecordBatch::try_new(
        show_schema(),
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(StringArray::from(roles)),
            Arc::new(BooleanArray::from(passwords)),
            Arc::new(Int64Array::from(tokens)),
            Arc::new(BooleanArray::from(ilp)),
            Arc::new(BooleanArray::from(builtin)),
        ],
    )?)
}
