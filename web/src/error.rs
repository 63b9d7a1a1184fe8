//! What a dashboard page answers when it cannot show what was asked: an
//! HTML page in the dashboard's layout, or, without a session, the way to
//! sign in.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use askama::Template;
use idemkey_api::engine::Refusal;
use idemkey_api::error::ApiError;

use crate::pages::Layout;
use crate::render::{render, see_other};

#[derive(Debug)]
pub enum PageError {
    /// No valid session: go and sign in.
    SignIn,
    /// The session's roles (or a bad CSRF token) do not allow this.
    Forbidden(&'static str),
    NotFound,
    BadRequest(String),
    /// The store could not answer; retry.
    Unavailable,
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    layout: Layout,
    heading: &'static str,
    message: String,
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self)
    }
}

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::SignIn => StatusCode::SEE_OTHER,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let (heading, message) = match self {
            Self::SignIn => return see_other("/dashboard/sign-in"),
            Self::Forbidden(why) => ("Not allowed", (*why).to_owned()),
            Self::NotFound => (
                "Not found",
                "There is nothing here for your tenant. The key may have been \
                 released, or its replay window may have ended."
                    .to_owned(),
            ),
            Self::BadRequest(why) => ("That request is not valid", why.clone()),
            Self::Unavailable => (
                "Temporarily unavailable",
                "The database could not answer. Nothing was changed; try again in a moment."
                    .to_owned(),
            ),
        };
        let page = ErrorPage {
            layout: Layout::bare(heading),
            heading,
            message,
        };
        render(self.status_code(), &page)
    }
}

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Forbidden | ApiError::Unauthorized => {
                Self::Forbidden("Your session does not allow this.")
            }
            ApiError::BadRequest(_, detail) => Self::BadRequest(detail),
            ApiError::Refused(refusal) => refusal.into(),
            _ => Self::Unavailable,
        }
    }
}

impl From<Refusal> for PageError {
    fn from(e: Refusal) -> Self {
        match e {
            Refusal::NotFound => Self::NotFound,
            _ => Self::Unavailable,
        }
    }
}
