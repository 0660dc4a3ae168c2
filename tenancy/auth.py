"""`Authorization: Bearer <token>` for every /v1 op."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from tenancy.access import Principal
from tenancy.models import ApiToken


class BearerTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise exceptions.AuthenticationFailed("the Authorization header must be 'Bearer <token>'")
        row = ApiToken.verify(token.strip())
        if row is None:
            raise exceptions.AuthenticationFailed("the token is invalid or has been revoked")
        row.touch()
        return (None, Principal.of_token(row))

    def authenticate_header(self, request):
        return 'Bearer realm="loom"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A token from `manage.py loom_token create`."}
