"""The A2A 1.0 agent card and its parts (interfaces, capabilities, skills, security, signatures).

ProtoJSON writes an empty string or list as no key at all, so "missing" and "empty" cannot be
told apart on input. A field is therefore refused when missing only where an empty value makes
the object unusable (names, ids, URLs of interfaces, versions); descriptions and the repeated
card fields (``supportedInterfaces``, ``skills``, the mode lists) default to empty. Whoever
*builds* a card fills them: a card for the TCK needs at least one skill and one interface.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from anet_core.wire._base import JsonObject, WireModel, exactly_one

ProtocolBinding = Literal["JSONRPC", "HTTP+JSON", "GRPC"]
JSONRPC_BINDING: ProtocolBinding = "JSONRPC"
HTTP_JSON_BINDING: ProtocolBinding = "HTTP+JSON"
GRPC_BINDING: ProtocolBinding = "GRPC"

A2A_PROTOCOL_VERSION = "1.0"
"""The ``protocolVersion`` of every interface this project serves (Major.Minor, no patch)."""

AGENT_CARD_WELL_KNOWN_PATH = "/.well-known/agent-card.json"


class AgentInterface(WireModel):
    """One endpoint of the agent: its URL, binding and protocol version (card order = preference).

    ``protocolBinding`` is a plain string in the proto; clients and the TCK recognise exactly
    ``JSONRPC``, ``HTTP+JSON`` and ``GRPC`` and skip anything else, so others are kept, not refused.
    """

    url: str = Field(min_length=1)
    protocol_binding: str = Field(min_length=1)
    tenant: str = ""
    protocol_version: str = Field(min_length=1)


class AgentProvider(WireModel):
    """The organisation behind the agent."""

    url: str = ""
    organization: str = Field(min_length=1)


class AgentExtension(WireModel):
    """An extension the agent supports; ``required`` means clients must request it."""

    uri: str = Field(min_length=1)
    description: str = ""
    required: bool = False
    params: JsonObject | None = None


class AgentCapabilities(WireModel):
    """Optional features; each flag is written whenever it is set, also when false."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] = Field(default_factory=list)
    extended_agent_card: bool | None = None


class StringList(WireModel):
    """The scopes a security requirement asks of one scheme (``{"list": [...]}``)."""

    scopes: list[str] = Field(default_factory=list, alias="list")


class SecurityRequirement(WireModel):
    """Scheme name → required scopes; all schemes in one requirement apply together."""

    schemes: dict[str, StringList] = Field(default_factory=dict)


class APIKeySecurityScheme(WireModel):
    """An API key in a header, query parameter or cookie."""

    description: str = ""
    location: str = ""
    name: str = ""


class HTTPAuthSecurityScheme(WireModel):
    """HTTP authentication, e.g. ``scheme="Bearer"`` (the local endpoint's token)."""

    description: str = ""
    scheme: str = Field(min_length=1)
    bearer_format: str = ""


class AuthorizationCodeOAuthFlow(WireModel):
    """OAuth 2.0 authorization-code flow."""

    authorization_url: str = ""
    token_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = Field(default_factory=dict)
    pkce_required: bool = False


class ClientCredentialsOAuthFlow(WireModel):
    """OAuth 2.0 client-credentials flow."""

    token_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = Field(default_factory=dict)


class ImplicitOAuthFlow(WireModel):
    """OAuth 2.0 implicit flow (deprecated in A2A 1.0, still parsed)."""

    authorization_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = Field(default_factory=dict)


class PasswordOAuthFlow(WireModel):
    """OAuth 2.0 password flow (deprecated in A2A 1.0, still parsed)."""

    token_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = Field(default_factory=dict)


class DeviceCodeOAuthFlow(WireModel):
    """OAuth 2.0 device-code flow (RFC 8628)."""

    device_authorization_url: str = ""
    token_url: str = ""
    refresh_url: str = ""
    scopes: dict[str, str] = Field(default_factory=dict)


_FLOW_MEMBERS = ("authorization_code", "client_credentials", "implicit", "password",
                 "device_code")


class OAuthFlows(WireModel):
    """Exactly one OAuth flow (oneof flow)."""

    authorization_code: AuthorizationCodeOAuthFlow | None = None
    client_credentials: ClientCredentialsOAuthFlow | None = None
    implicit: ImplicitOAuthFlow | None = None
    password: PasswordOAuthFlow | None = None
    device_code: DeviceCodeOAuthFlow | None = None

    @model_validator(mode="after")
    def _one_flow(self) -> OAuthFlows:
        exactly_one(self, _FLOW_MEMBERS, "flow")
        return self


class OAuth2SecurityScheme(WireModel):
    """OAuth 2.0 with its flow and optional RFC 8414 metadata URL."""

    description: str = ""
    flows: OAuthFlows | None = None
    oauth2_metadata_url: str = ""


class OpenIdConnectSecurityScheme(WireModel):
    """OpenID Connect discovery."""

    description: str = ""
    open_id_connect_url: str = ""


class MutualTlsSecurityScheme(WireModel):
    """Mutual TLS."""

    description: str = ""


_SCHEME_MEMBERS = ("api_key_security_scheme", "http_auth_security_scheme",
                   "oauth2_security_scheme", "open_id_connect_security_scheme",
                   "mtls_security_scheme")


class SecurityScheme(WireModel):
    """One security scheme (oneof scheme), e.g. ``{"httpAuthSecurityScheme": {...}}``."""

    api_key_security_scheme: APIKeySecurityScheme | None = None
    http_auth_security_scheme: HTTPAuthSecurityScheme | None = None
    oauth2_security_scheme: OAuth2SecurityScheme | None = None
    open_id_connect_security_scheme: OpenIdConnectSecurityScheme | None = None
    mtls_security_scheme: MutualTlsSecurityScheme | None = None

    @model_validator(mode="after")
    def _one_scheme(self) -> SecurityScheme:
        exactly_one(self, _SCHEME_MEMBERS, "scheme")
        return self

    @classmethod
    def bearer(cls, description: str = "", bearer_format: str = "") -> SecurityScheme:
        """An HTTP bearer-token scheme."""
        return cls(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="Bearer", description=description, bearer_format=bearer_format))


class AgentSkill(WireModel):
    """Something the agent can do, with tags and examples for discovery."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    input_modes: list[str] = Field(default_factory=list)
    output_modes: list[str] = Field(default_factory=list)
    security_requirements: list[SecurityRequirement] = Field(default_factory=list)


class AgentCardSignature(WireModel):
    """A JWS over the card (JCS-canonical, without ``signatures``): base64url header and value."""

    protected: str = Field(min_length=1)
    signature: str = Field(min_length=1)
    header: JsonObject | None = None


class AgentCard(WireModel):
    """What an agent says about itself; served at ``/.well-known/agent-card.json``."""

    name: str = Field(min_length=1)
    description: str = ""
    supported_interfaces: list[AgentInterface] = Field(default_factory=list)
    provider: AgentProvider | None = None
    version: str = Field(min_length=1)
    documentation_url: str | None = None
    capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities)
    security_schemes: dict[str, SecurityScheme] = Field(default_factory=dict)
    security_requirements: list[SecurityRequirement] = Field(default_factory=list)
    default_input_modes: list[str] = Field(default_factory=list)
    default_output_modes: list[str] = Field(default_factory=list)
    skills: list[AgentSkill] = Field(default_factory=list)
    signatures: list[AgentCardSignature] = Field(default_factory=list)
    icon_url: str | None = None

    def interface(self, binding: str) -> AgentInterface | None:
        """The preferred (first) interface with this protocol binding, if any."""
        return next((i for i in self.supported_interfaces if i.protocol_binding == binding), None)

    def unsigned_wire(self) -> dict[str, object]:
        """The ProtoJSON object without ``signatures``: the input of JCS for signing (A2A §8.4)."""
        body = self.wire()
        body.pop("signatures", None)
        return body
