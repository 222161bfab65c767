"""gRPC's own Python implementation (grpcio) on both ends of a health check, so kplane's gRPC
probes and its agnhost grpc-health-checking are tried against a server and a client that are
not kplane's (tests/integration/agent.rs).

    grpcio_health.py serve PORT           health service on $POD_IP:PORT: "" is SERVING,
                                        "sleepy" NOT_SERVING, any other name NOT_FOUND
    grpcio_health.py bare PORT            a gRPC server on $POD_IP:PORT without the health service
    grpcio_health.py check ADDR SERVICE   prints the status of SERVICE at ADDR, or the error code
"""

import os
import sys
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def serve(port, with_health):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    if with_health:
        servicer = health.HealthServicer()
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        servicer.set("sleepy", health_pb2.HealthCheckResponse.NOT_SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_insecure_port(f"{os.environ['POD_IP']}:{port}")
    server.start()
    server.wait_for_termination()


def check(addr, service):
    with grpc.insecure_channel(addr) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            print(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))
        except grpc.RpcError as error:
            print(error.code().name)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        serve(sys.argv[2], with_health=(mode == "serve"))
