"""The official a2a-sdk as oracle: its protobuf types, MessageToDict and ParseDict.

For each type: SDK JSON -> our model -> .wire() equals the SDK JSON, and our .wire() parses
strictly (unknown fields refused) back into the same proto message.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import pytest

pytest.importorskip("a2a")

from a2a import types as sdk
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as ProtoMessage

from anet_core import wire
from anet_core.wire import WireModel

ModelT = TypeVar("ModelT", bound=WireModel)


def sdk_json(message: ProtoMessage, **options: Any) -> dict[str, Any]:
    result: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=False, **options)
    return result


def assert_round_trip(model: type[ModelT], message: ProtoMessage) -> ModelT:
    """SDK JSON -> ours -> same JSON; ours -> strict ParseDict -> the same proto message."""
    expected = sdk_json(message)
    ours = model.from_wire(expected)
    assert ours.wire() == expected
    parsed = ParseDict(ours.wire(), type(message)(), ignore_unknown_fields=False)
    assert parsed == message
    # The JSON text form too (what actually goes on the wire).
    assert json.loads(ours.wire_json()) == expected
    return ours


def _text_part(text: str) -> sdk.Part:
    return sdk.Part(text=text)


def every_part_kind() -> list[sdk.Part]:
    data_object = sdk.Part(media_type="application/json")
    data_object.data.struct_value.update({"key": "value", "count": 42, "nested": {"a": [1, 2]}})
    data_string = sdk.Part()
    data_string.data.string_value = "a bare JSON string is also legal"
    data_list = sdk.Part()
    data_list.data.list_value.extend([1, "two", True])
    with_metadata = sdk.Part(text="Hello", media_type="text/plain", filename="hello.txt")
    with_metadata.metadata.update({"source": "test"})
    return [
        _text_part("hello"),
        with_metadata,
        sdk.Part(raw=b"\x00\xffhello?>", filename="a.bin", media_type="application/octet-stream"),
        sdk.Part(url="https://example.com/output.txt", filename="output.txt",
                 media_type="text/plain"),
        data_object,
        data_string,
        data_list,
    ]


def full_message(role: Any = sdk.Role.ROLE_USER, message_id: str = "m-1") -> sdk.Message:
    message = sdk.Message(
        message_id=message_id, context_id="c-1", task_id="t-1", role=role,
        parts=every_part_kind(), extensions=["https://example.com/ext/geo/v1"],
        reference_task_ids=["t-0"])
    message.metadata.update({"https://example.com/ext/geo/v1": {"lat": 1.5}})
    return message


def full_task() -> sdk.Task:
    status = sdk.TaskStatus(state=sdk.TaskState.TASK_STATE_INPUT_REQUIRED,
                            message=sdk.Message(message_id="s-1", role=sdk.Role.ROLE_AGENT,
                                                parts=[_text_part("need more")]))
    status.timestamp.FromJsonString("2026-11-29T18:44:22.736571Z")
    task = sdk.Task(
        id="t-1", context_id="c-1", status=status,
        artifacts=[sdk.Artifact(artifact_id="a-1", name="echo", description="the echo",
                                parts=[_text_part("echo: hello")], extensions=["urn:x"])],
        history=[full_message(), full_message(sdk.Role.ROLE_AGENT, "m-2")])
    task.metadata.update({"anet.state_seq": 3})
    return task


# --- the proto schema itself ---------------------------------------------------------------------


def _wire_models() -> list[type[WireModel]]:
    return [obj for name in wire.__all__
            if isinstance(obj := getattr(wire, name), type) and issubclass(obj, WireModel)
            and obj is not WireModel]


@pytest.mark.parametrize("model", _wire_models(), ids=lambda m: m.__name__)
def test_model_fields_are_exactly_the_proto_fields(model: type[WireModel]) -> None:
    descriptor = a2a_pb2.DESCRIPTOR.message_types_by_name[model.__name__]
    proto_fields = {f.json_name: f for f in descriptor.fields}
    ours = {field.alias: field for field in model.model_fields.values()}
    assert set(ours) == set(proto_fields)
    for json_name, field in ours.items():
        proto = proto_fields[json_name]
        declared_optional = field.default is None and field.default_factory is None
        is_scalar = proto.message_type is None
        if declared_optional:
            assert proto.has_presence, f"{json_name} has no presence in the proto"
        if is_scalar and proto.has_presence:
            assert declared_optional, f"{json_name} is an optional/oneof scalar in the proto"


@pytest.mark.parametrize("ours,theirs", [(wire.Role, "Role"), (wire.TaskState, "TaskState")])
def test_enums_match_proto_names_and_numbers(ours: type[wire.ProtoEnum], theirs: str) -> None:
    values = a2a_pb2.DESCRIPTOR.enum_types_by_name[theirs].values
    assert [(m.value, m.number) for m in ours] == [(v.name, v.number) for v in values]


def test_method_table_matches_the_proto_service() -> None:
    service = next(iter(a2a_pb2.DESCRIPTOR.services_by_name.values()))
    rpcs = {m.name: m for m in service.methods}
    assert set(rpcs) == {m.value for m in wire.A2AMethod}
    for method, spec in wire.METHODS.items():
        rpc = rpcs[method.value]
        assert spec.params_model.__name__ == rpc.input_type.name
        assert spec.streaming == rpc.server_streaming
        result = spec.result_model.__name__ if spec.result_model else "Empty"
        assert result == rpc.output_type.name


# --- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("part", every_part_kind(), ids=lambda p: p.WhichOneof("content"))
def test_part_every_kind(part: sdk.Part) -> None:
    ours = assert_round_trip(wire.Part, part)
    assert ours.kind == part.WhichOneof("content")


def test_raw_part_bytes_and_base64() -> None:
    ours = assert_round_trip(wire.Part, every_part_kind()[2])
    assert ours.raw == b"\x00\xffhello?>"
    assert ours.wire()["raw"] == "AP9oZWxsbz8+"


def test_message_with_every_part_kind() -> None:
    ours = assert_round_trip(wire.Message, full_message())
    assert [p.kind for p in ours.parts] == ["text", "text", "raw", "url", "data", "data", "data"]


def test_task_with_history_and_artifacts() -> None:
    ours = assert_round_trip(wire.Task, full_task())
    assert len(ours.history) == 2 and ours.artifacts[0].artifact_id == "a-1"
    assert ours.status.state is wire.TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.mark.parametrize("nanos,text", [
    (0, "2026-01-01T00:00:00Z"),
    (123_000_000, "2026-01-01T00:00:00.123Z"),
    (123_456_000, "2026-01-01T00:00:00.123456Z"),
])
def test_timestamps_written_as_protobuf_writes_them(nanos: int, text: str) -> None:
    status = sdk.TaskStatus(state=sdk.TaskState.TASK_STATE_WORKING)
    status.timestamp.FromJsonString("2026-01-01T00:00:00Z")
    status.timestamp.nanos = nanos
    assert sdk_json(status)["timestamp"] == text
    assert_round_trip(wire.TaskStatus, status)


def test_status_update_event() -> None:
    status = sdk.TaskStatus(state=sdk.TaskState.TASK_STATE_WORKING)
    status.timestamp.FromJsonString("2026-11-29T18:44:38.556718Z")
    event = sdk.TaskStatusUpdateEvent(task_id="t", context_id="c", status=status)
    event.metadata.update({"anet.state_seq": 4})
    assert_round_trip(wire.TaskStatusUpdateEvent, event)


def test_artifact_update_event_with_append_and_last_chunk() -> None:
    event = sdk.TaskArtifactUpdateEvent(
        task_id="t", context_id="c", append=True, last_chunk=True,
        artifact=sdk.Artifact(artifact_id="a", name="echo", parts=[_text_part("chunk-2")]))
    ours = assert_round_trip(wire.TaskArtifactUpdateEvent, event)
    assert ours.wire()["append"] is True and ours.wire()["lastChunk"] is True


def _stream_responses() -> list[sdk.StreamResponse]:
    status = sdk.TaskStatus(state=sdk.TaskState.TASK_STATE_COMPLETED)
    return [
        sdk.StreamResponse(task=full_task()),
        sdk.StreamResponse(message=full_message(sdk.Role.ROLE_AGENT)),
        sdk.StreamResponse(status_update=sdk.TaskStatusUpdateEvent(
            task_id="t", context_id="c", status=status)),
        sdk.StreamResponse(artifact_update=sdk.TaskArtifactUpdateEvent(
            task_id="t", context_id="c",
            artifact=sdk.Artifact(artifact_id="a", parts=[_text_part("x")]))),
    ]


@pytest.mark.parametrize("response", _stream_responses(),
                         ids=lambda r: r.WhichOneof("payload"))
def test_stream_response_each_member(response: sdk.StreamResponse) -> None:
    ours = assert_round_trip(wire.StreamResponse, response)
    expected_key = next(iter(sdk_json(response)))
    assert ours.kind == expected_key
    assert wire.StreamResponse.of(ours.payload).wire() == ours.wire()


@pytest.mark.parametrize("response", [
    sdk.SendMessageResponse(task=full_task()),
    sdk.SendMessageResponse(message=full_message(sdk.Role.ROLE_AGENT)),
], ids=["task", "message"])
def test_send_message_response(response: sdk.SendMessageResponse) -> None:
    ours = assert_round_trip(wire.SendMessageResponse, response)
    assert ours.payload is (ours.task or ours.message)


def full_card() -> sdk.AgentCard:
    card = sdk.AgentCard(
        name="Echo Proxy", description="Proxies A2A calls", version="1.0.0",
        supported_interfaces=[
            sdk.AgentInterface(url="http://127.0.0.1:43811/a2a/v1/agents/x/jsonrpc",
                               protocol_binding="JSONRPC", protocol_version="1.0"),
            sdk.AgentInterface(url="http://127.0.0.1:43811/a2a/v1/agents/x/rest",
                               protocol_binding="HTTP+JSON", protocol_version="1.0", tenant="t1"),
        ],
        provider=sdk.AgentProvider(organization="Example Org", url="https://example.com"),
        documentation_url="https://example.com/docs", icon_url="https://example.com/icon.png",
        capabilities=sdk.AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=False,
            extensions=[sdk.AgentExtension(uri="https://example.com/ext/citations/v1",
                                           description="Citations", required=True)]),
        security_schemes={
            "anetLocal": sdk.SecurityScheme(http_auth_security_scheme=sdk.HTTPAuthSecurityScheme(
                scheme="Bearer", bearer_format="opaque", description="local token")),
            "key": sdk.SecurityScheme(api_key_security_scheme=sdk.APIKeySecurityScheme(
                location="header", name="X-API-Key")),
            "oauth": sdk.SecurityScheme(oauth2_security_scheme=sdk.OAuth2SecurityScheme(
                flows=sdk.OAuthFlows(client_credentials=sdk.ClientCredentialsOAuthFlow(
                    token_url="https://a/token", scopes={"read": "Read"})))),
            "oidc": sdk.SecurityScheme(
                open_id_connect_security_scheme=sdk.OpenIdConnectSecurityScheme(
                    open_id_connect_url="https://a/.well-known/openid-configuration")),
            "mtls": sdk.SecurityScheme(mtls_security_scheme=sdk.MutualTlsSecurityScheme(
                description="mTLS")),
        },
        security_requirements=[
            sdk.SecurityRequirement(schemes={"anetLocal": sdk.StringList(list=[])}),
            sdk.SecurityRequirement(schemes={"oauth": sdk.StringList(list=["read"])}),
        ],
        default_input_modes=["text/plain"], default_output_modes=["text/plain", "application/json"],
        skills=[sdk.AgentSkill(
            id="echo", name="Echo", description="Echoes input", tags=["echo"], examples=["hi"],
            input_modes=["text/plain"], output_modes=["text/plain"],
            security_requirements=[sdk.SecurityRequirement(
                schemes={"anetLocal": sdk.StringList(list=[])})])],
        signatures=[sdk.AgentCardSignature(
            protected="eyJhbGciOiJFUzI1NiIsInR5cCI6IkpPU0UiLCJraWQiOiJrZXktMSJ9",
            signature="QFdkZmFrZQ")],
    )
    card.capabilities.extensions[0].params.update({"style": "apa", "max": 3})
    card.signatures[0].header.update({"kid": "key-1"})
    return card


def test_agent_card_with_bearer_signatures_and_extensions() -> None:
    ours = assert_round_trip(wire.AgentCard, full_card())
    bearer = ours.security_schemes["anetLocal"].http_auth_security_scheme
    assert bearer is not None and bearer.scheme == "Bearer"
    assert ours.signatures[0].header == {"kid": "key-1"}
    assert ours.capabilities.extensions[0].required is True
    assert ours.interface("HTTP+JSON") is ours.supported_interfaces[1]
    # Capability flags that are set to false are still written (proto3 optional).
    assert ours.wire()["capabilities"]["pushNotifications"] is False
    assert "signatures" not in ours.unsigned_wire() and "signatures" in ours.wire()


@pytest.mark.parametrize("flows", [
    sdk.OAuthFlows(authorization_code=sdk.AuthorizationCodeOAuthFlow(
        authorization_url="https://a/auth", token_url="https://a/token", refresh_url="https://a/r",
        scopes={"s": "S"}, pkce_required=True)),
    sdk.OAuthFlows(device_code=sdk.DeviceCodeOAuthFlow(
        device_authorization_url="https://a/dev", token_url="https://a/token")),
    sdk.OAuthFlows(implicit=sdk.ImplicitOAuthFlow(authorization_url="https://a/auth")),
    sdk.OAuthFlows(password=sdk.PasswordOAuthFlow(token_url="https://a/token")),
], ids=lambda f: f.WhichOneof("flow"))
def test_oauth_flows(flows: sdk.OAuthFlows) -> None:
    assert_round_trip(wire.OAuth2SecurityScheme,
                      sdk.OAuth2SecurityScheme(flows=flows, oauth2_metadata_url="https://a/meta"))


def test_minimal_card_writes_capabilities_even_when_empty() -> None:
    card = sdk.AgentCard(name="n", description="d", version="1",
                         capabilities=sdk.AgentCapabilities())
    ours = assert_round_trip(wire.AgentCard, card)
    assert ours.wire()["capabilities"] == {}


def test_digest_card_example_parses_and_matches_the_sdk() -> None:
    example = {
        "name": "Echo Proxy", "description": "Proxies A2A calls to an upstream agent",
        "supportedInterfaces": [
            {"url": "https://proxy.example.com/a2a/jsonrpc", "protocolBinding": "JSONRPC",
             "protocolVersion": "1.0"},
            {"url": "https://proxy.example.com/a2a/rest", "protocolBinding": "HTTP+JSON",
             "protocolVersion": "1.0"}],
        "provider": {"organization": "Example Org", "url": "https://example.com"},
        "version": "1.0.0",
        "capabilities": {"streaming": True, "pushNotifications": False,
                         "extendedAgentCard": False,
                         "extensions": [{"uri": "https://example.com/ext/citations/v1",
                                         "description": "Citations", "required": False,
                                         "params": {"style": "apa"}}]},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {
            "scheme": "Bearer", "bearerFormat": "JWT", "description": "Bearer token"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes input", "tags": ["echo"]}],
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "QFdk",
                        "header": {"kid": "key-1"}}],
    }
    proto = ParseDict(example, sdk.AgentCard())
    assert wire.AgentCard.from_wire(example).wire() == sdk_json(proto)


def test_list_tasks_response_always_has_four_keys() -> None:
    empty = sdk.ListTasksResponse(page_size=50, total_size=0, next_page_token="")
    ours = wire.ListTasksResponse(page_size=50)
    # Equal to the SDK's own server output (always_print_fields_with_no_presence=True).
    assert ours.wire() == sdk_json(empty, always_print_fields_with_no_presence=True)
    assert ParseDict(ours.wire(), sdk.ListTasksResponse()) == empty


def test_list_tasks_response_with_tasks_reads_the_sdk_server_form() -> None:
    response = sdk.ListTasksResponse(tasks=[full_task()], page_size=50, total_size=1,
                                     next_page_token="abc")
    verbose = sdk_json(response, always_print_fields_with_no_presence=True)
    ours = wire.ListTasksResponse.from_wire(verbose)
    assert ours.wire() == sdk_json(response)  # lean form: "filename": "" and the like dropped
    assert ParseDict(ours.wire(), sdk.ListTasksResponse(), ignore_unknown_fields=False) == response


def test_send_message_request_with_full_configuration() -> None:
    request = sdk.SendMessageRequest(
        tenant="t", message=full_message(),
        configuration=sdk.SendMessageConfiguration(
            accepted_output_modes=["text/plain"], history_length=0, return_immediately=True,
            task_push_notification_config=sdk.TaskPushNotificationConfig(
                url="https://hook", token="tok",
                authentication=sdk.AuthenticationInfo(scheme="Bearer", credentials="c"))))
    request.metadata.update({"k": "v"})
    ours = assert_round_trip(wire.SendMessageRequest, request)
    assert ours.wire()["configuration"]["historyLength"] == 0  # optional: written when 0
    assert ours.configuration is not None and ours.configuration.return_immediately is True


def test_sdk_client_send_message_params_with_empty_configuration() -> None:
    request = sdk.SendMessageRequest(message=full_message(),
                                     configuration=sdk.SendMessageConfiguration())
    ours = assert_round_trip(wire.SendMessageRequest, request)
    assert ours.wire()["configuration"] == {}


@pytest.mark.parametrize("model,message", [
    (wire.GetTaskRequest, sdk.GetTaskRequest(id="t", history_length=0, tenant="x")),
    (wire.GetTaskRequest, sdk.GetTaskRequest(id="t")),
    (wire.CancelTaskRequest, sdk.CancelTaskRequest(id="t")),
    (wire.SubscribeToTaskRequest, sdk.SubscribeToTaskRequest(id="t", tenant="x")),
    (wire.GetExtendedAgentCardRequest, sdk.GetExtendedAgentCardRequest()),
    (wire.ListTasksRequest, sdk.ListTasksRequest(
        context_id="c", status=sdk.TaskState.TASK_STATE_WORKING, page_size=5, page_token="p",
        history_length=0, include_artifacts=False)),
    (wire.TaskPushNotificationConfig, sdk.TaskPushNotificationConfig(
        task_id="t", id="p", url="https://hook", token="tok",
        authentication=sdk.AuthenticationInfo(scheme="Bearer"))),
    (wire.GetTaskPushNotificationConfigRequest,
     sdk.GetTaskPushNotificationConfigRequest(task_id="t", id="p")),
    (wire.DeleteTaskPushNotificationConfigRequest,
     sdk.DeleteTaskPushNotificationConfigRequest(task_id="t", id="p")),
    (wire.ListTaskPushNotificationConfigsRequest,
     sdk.ListTaskPushNotificationConfigsRequest(task_id="t", page_size=3, page_token="x")),
    (wire.ListTaskPushNotificationConfigsResponse, sdk.ListTaskPushNotificationConfigsResponse(
        configs=[sdk.TaskPushNotificationConfig(task_id="t", url="https://hook")],
        next_page_token="n")),
], ids=lambda v: type(v).__name__ if isinstance(v, ProtoMessage) else "")
def test_request_types(model: type[WireModel], message: ProtoMessage) -> None:
    assert_round_trip(model, message)


def test_list_tasks_request_timestamp_filter_and_explicit_false() -> None:
    request = sdk.ListTasksRequest(include_artifacts=False)
    request.status_timestamp_after.FromJsonString("2026-01-02T03:04:05.5Z")
    ours = assert_round_trip(wire.ListTasksRequest, request)
    assert ours.wire() == {"statusTimestampAfter": "2026-01-02T03:04:05.500Z",
                           "includeArtifacts": False}


def test_integer_metadata_stays_integer_where_protobuf_makes_floats() -> None:
    text = ('{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"count":42}}],'
            '"metadata":{"anet.state_seq":7,"nested":{"n":[1,2]}}}')
    ours = wire.Message.from_wire_json(text)
    assert ours.metadata == {"anet.state_seq": 7, "nested": {"n": [1, 2]}}
    assert type(ours.metadata["anet.state_seq"]) is int
    data = ours.parts[0].data
    assert isinstance(data, dict) and type(data["count"]) is int
    assert '"anet.state_seq":7,' in ours.wire_json() and '"count":42}' in ours.wire_json()
    # The oracle shows why: the SDK's protobuf Struct turns the same integers into floats.
    assert sdk_json(ParseDict(json.loads(text), sdk.Message()))["metadata"]["anet.state_seq"] == 7.0
    assert type(sdk_json(ParseDict(json.loads(text), sdk.Message()))["metadata"]
                ["anet.state_seq"]) is float


def test_snake_case_input_as_protobuf_accepts_it() -> None:
    params = {"message": {"message_id": "m", "context_id": "c", "role": "ROLE_USER",
                          "parts": [{"text": "hi", "media_type": "text/plain"}],
                          "reference_task_ids": ["r"]},
              "configuration": {"history_length": 2, "return_immediately": True,
                                "accepted_output_modes": ["text/plain"]}}
    theirs = ParseDict(params, sdk.SendMessageRequest())
    assert wire.SendMessageRequest.from_wire(params).wire() == sdk_json(theirs)
