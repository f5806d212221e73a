"""``AgentServicer``: the Agent API (agent.proto) as a thin adapter over the runtime.

Each method converts the request (``convert`` validates wire input), makes one synchronous call
into the runtime's ``AgentCalls``, and converts the result; errors become precise status codes.
Commands sends its initial metadata as soon as the stream is attached (the agent awaits it to know
it is connected), then drains the agent's channel; the runtime hears when the stream ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fairshare.v1 import agent_pb2 as pb
from fairshare.v1 import agent_pb2_grpc

from master.model import StreamEnd
from master.runtime.agents import AgentCalls
from master.service import convert, streams
from master.service.errors import Context, abort_with, grpc_code, maps_errors

__all__ = ["AgentServicer"]


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    """Agents' calls, forwarded to the runtime."""

    def __init__(self, agents: AgentCalls) -> None:
        self.agents = agents

    @maps_errors
    async def Register(self, request: pb.RegisterRequest, context: Context) -> pb.RegisterResponse:
        """Admit a new agent."""
        spec = convert.agent_spec(request.agent_info)
        agent_id, interval, master_id = self.agents.register(spec)
        return pb.RegisterResponse(
            agent_id=agent_id,
            heartbeat_interval=convert.duration(interval),
            master_id=master_id,
        )

    @maps_errors
    async def Reregister(
        self, request: pb.ReregisterRequest, context: Context
    ) -> pb.ReregisterResponse:
        """Re-admit a known agent with its tasks."""
        spec = convert.agent_spec(request.agent_info)
        tasks = [
            (
                task.framework_id,
                convert.task_launch(task.info),
                convert.status_from_pb(task.status, agent_update=False),
            )
            for task in request.tasks
        ]
        interval, master_id = self.agents.reregister(request.agent_id, spec, tasks)
        return pb.ReregisterResponse(
            heartbeat_interval=convert.duration(interval), master_id=master_id
        )

    @maps_errors
    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: Context
    ) -> pb.HeartbeatResponse:
        """Liveness."""
        return pb.HeartbeatResponse(master_id=self.agents.heartbeat(request.agent_id))

    async def Commands(
        self, request: pb.CommandsRequest, context: Context
    ) -> AsyncIterator[pb.CommandsResponse]:
        """The command stream to the agent."""
        try:
            channel = self.agents.open_commands(request.agent_id)
        except Exception as error:
            await abort_with(context, error, "Commands")
        try:
            await context.send_initial_metadata(())
            while True:
                command = await channel.get()
                if isinstance(command, StreamEnd):
                    if command.code != "OK":
                        await context.abort(grpc_code(command.code), command.message)
                    return
                yield streams.command_to_pb(command)
        finally:
            self.agents.close_commands(request.agent_id, channel)

    @maps_errors
    async def UpdateStatus(
        self, request: pb.UpdateStatusRequest, context: Context
    ) -> pb.UpdateStatusResponse:
        """One task status update."""
        status = convert.status_from_pb(request.status, agent_update=True)
        latest = convert.latest_state(request.latest_state)
        self.agents.update_status(request.agent_id, request.framework_id, status, latest)
        return pb.UpdateStatusResponse()
