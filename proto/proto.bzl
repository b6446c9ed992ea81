"""cc_grpc_proto: C++ code for a .proto file with Debian's protoc and plugin.

cc_grpc_proto(name = "foo", src = "foo.proto", deps = [...]) yields
  foo_cc_proto  the messages (foo.pb.h/.cc)
  foo_cc_grpc   the service stubs (foo.grpc.pb.h/.cc), depending on foo_cc_proto
`deps` are other cc_grpc_proto names whose .proto files `src` imports.
protoc runs from a genrule so Bazel needs no protobuf rules from the network.
"""

def cc_grpc_proto(name, src, deps = [], visibility = None):
    base = src[:-len(".proto")]
    pkg = native.package_name()
    outs_pb = [base + ".pb.h", base + ".pb.cc"]
    outs_grpc = [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    dep_srcs = [d + "_proto_src" for d in deps]
    native.filegroup(name = name + "_proto_src", srcs = [src], visibility = visibility)
    native.genrule(
        name = name + "_codegen",
        srcs = [src] + dep_srcs,
        outs = outs_pb + outs_grpc,
        cmd = ("/usr/bin/protoc -I. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin {pkg}/{src}").format(
            pkg = pkg,
            src = src,
        ),
    )
    native.cc_library(
        name = name + "_cc_proto",
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = [d + "_cc_proto" for d in deps] + ["@system_libs//:protobuf"],
        visibility = visibility,
    )
    native.cc_library(
        name = name + "_cc_grpc",
        srcs = [base + ".grpc.pb.cc"],
        hdrs = [base + ".grpc.pb.h"],
        deps = [":" + name + "_cc_proto"] + ["@system_libs//:grpc"],
        visibility = visibility,
    )
