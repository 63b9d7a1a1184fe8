//! The policy editor of one operation class (admins only):
//!
//! - `GET /dashboard/classes/{operation}`: the class's policy in a form.
//! - `GET /dashboard/classes/_new`: the same form with a name field, for a
//!   class not used yet (`_` cannot start an operation name, so no class is
//!   shadowed by it).
//! - `POST /dashboard/classes/{operation}` with `action=save` (set the whole
//!   policy) or `action=reset` (back to the defaults), and
//!   `POST /dashboard/classes` (save a new class's policy).
//!
//! Checked in this order, each on the server: session, CSRF token, admin
//! role, then the input. The form's values go through exactly the path a
//! `PUT /v1/operation-classes/{operation}` body does (they are assembled
//! into the same JSON and read by `Policy::from_json`), so the checks and
//! the error texts are the API's; an error is shown beside its field. Saving
//! and resetting call the engine, which evicts this node's cached policy.
//!
//! The handlers are here; the form model, and the page built from it, are
//! in `form`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use idemkey_api::domain::policy::document::PolicyJsonError;
use idemkey_api::domain::{OperationName, Policy};
use idemkey_api::routes::AppState;

use crate::csrf;
use crate::error::PageError;
use crate::render::{render, see_other};
use crate::session::{Keys, Session};

mod form;

use form::{policy_page, PolicyForm};

const ADMIN_ONLY: &str = "Only an admin can change a class's policy. Sign in with an admin token.";

/// `GET /dashboard/classes/{operation}`.
pub async fn edit(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    if !session.is_admin() {
        return Err(PageError::Forbidden(ADMIN_ONLY));
    }
    let op = OperationName::parse(&path).map_err(|_| PageError::NotFound)?;
    let class = state.engine.operation_class(&session.tenant, &op).await?;
    let form = PolicyForm::of(&class.policy);
    let page = policy_page(&req, &session, Some((&op, &class)), &form, None);
    Ok(render(StatusCode::OK, &page))
}

/// `GET /dashboard/classes/_new`.
pub async fn new(req: HttpRequest, session: Session) -> Result<HttpResponse, PageError> {
    if !session.is_admin() {
        return Err(PageError::Forbidden(ADMIN_ONLY));
    }
    let form = PolicyForm::of(&Policy::default());
    let page = policy_page(&req, &session, None, &form, None);
    Ok(render(StatusCode::OK, &page))
}

/// `POST /dashboard/classes/{operation}`: save or reset.
pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
    form: web::Form<PolicyForm>,
) -> Result<HttpResponse, PageError> {
    allowed(&req, &session, &form)?;
    let op = OperationName::parse(&path).map_err(|_| PageError::NotFound)?;
    match form.action.as_str() {
        "save" => save(&req, &state, &session, &op, &form, false).await,
        "reset" => {
            state
                .engine
                .reset_operation_class(&session.tenant, &op)
                .await?;
            Ok(see_other(&format!(
                "/dashboard/classes?done=reset&operation={op}"
            )))
        }
        _ => Err(PageError::BadRequest("action must be save or reset".into())),
    }
}

/// `POST /dashboard/classes`: save the policy of a class named in the form.
pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    form: web::Form<PolicyForm>,
) -> Result<HttpResponse, PageError> {
    allowed(&req, &session, &form)?;
    match OperationName::parse(form.operation.trim()) {
        Ok(op) => save(&req, &state, &session, &op, &form, true).await,
        Err(e) => {
            let mut page = policy_page(&req, &session, None, &form, None);
            page.name.error = Some(e.to_string());
            Ok(render(StatusCode::UNPROCESSABLE_ENTITY, &page))
        }
    }
}

/// The CSRF token, then the role: a viewer's forged form is refused here
/// whatever else it carries.
fn allowed(req: &HttpRequest, session: &Session, form: &PolicyForm) -> Result<(), PageError> {
    if !csrf::session_token_ok(&Keys::of(req), session, &form.csrf) {
        return Err(PageError::Forbidden(
            "This form expired or did not come from this site. Reload the page and try again.",
        ));
    }
    if !session.is_admin() {
        return Err(PageError::Forbidden(ADMIN_ONLY));
    }
    Ok(())
}

async fn save(
    req: &HttpRequest,
    state: &AppState,
    session: &Session,
    op: &OperationName,
    form: &PolicyForm,
    is_new: bool,
) -> Result<HttpResponse, PageError> {
    let json = form.document().to_string();
    match Policy::from_json(json.as_bytes()) {
        Ok(policy) => {
            state
                .engine
                .set_operation_class(&session.tenant, op, &policy)
                .await?;
            Ok(see_other(&format!(
                "/dashboard/classes?done=saved&operation={op}"
            )))
        }
        Err(e) => {
            let error = match e {
                PolicyJsonError::Invalid(e) => (e.field, e.message),
                PolicyJsonError::Syntax(why) => (String::new(), why),
            };
            let page = if is_new {
                let mut page = policy_page(req, session, None, form, Some(error));
                page.name.value = op.as_str().to_owned();
                page
            } else {
                let class = state.engine.operation_class(&session.tenant, op).await?;
                policy_page(req, session, Some((op, &class)), form, Some(error))
            };
            Ok(render(StatusCode::UNPROCESSABLE_ENTITY, &page))
        }
    }
}
