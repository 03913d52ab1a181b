"""Specs written by NVIDIA's leapp 0.7.2 (from runs of it), as YAML text."""

# Written by NVIDIA's leapp 0.7.2 (DESIGN.md appendix): the seed's two-node pipeline.
LEAPP_SEED_SPEC = """\
models:
  preprocess:
    inputs:
    - name: state
      dtype: float32
      shape: [6]
      type: tensor
    - name: velocity
      dtype: float32
      shape: [3]
      type: tensor
    outputs:
    - name: obs
      dtype: float32
      shape: [9]
      type: tensor
    parameters:
      model_path: preprocess.pt
      md5sum: f45a9214ccda98bc7c509872ab3c4f74
      sha256sum: e169269023d144f9581daba489526f1cb93052c7f29a06773108b7d83f31050c
      backend: jit
      warp_segments: 0
  policy:
    inputs:
    - name: obs
      dtype: float32
      shape: [9]
      type: tensor
    outputs:
    - name: action
      dtype: float32
      shape: [6]
      type: tensor
    parameters:
      model_path: policy.onnx
      md5sum: 6455a4066b6feeab64b5432bc7a2055e
      sha256sum: 7ddf591d75e4553d3bc60b54a7f49f0823154ea87a5fe26c043fe247eb10c517
      backend: onnx
      warp_segments: 0
      opset_version: 20

pipeline:
  data_flow:
    preprocess/obs: [policy/obs]
  feedback_flow: {}
  inputs:
    preprocess: [state, velocity]
  outputs:
    policy: [action]

system information:
  cuda version: None
  leapp config version: '1.3'
  leapp version: 0.7.2
  os: Debian GNU/Linux 12
  python version: 3.11.7
  torch version: 2.13.0+cpu
  warp version: null
"""

# Written by NVIDIA's leapp 0.7.2 (DESIGN.md appendix): state, semantics, temporal axis, pt2.
LEAPP_SEMANTIC_SPEC = """\
models:
  policy:
    inputs:
    - name: joint_pos
      dtype: float32
      shape: [6]
      type: tensor
      kind: state/joint/position
      element_names: [[hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
      frame: base
      units: rad
    - name: joint_vel
      dtype: float32
      shape: [6]
      type: tensor
      kind: state/joint/velocity
    - name: h
      dtype: float32
      shape: [6]
      type: tensor
    outputs:
    - name: action
      dtype: float32
      shape: [6]
      type: tensor
      kind: target/joint/position
      element_names: [[hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
    - name: action_chunk
      dtype: float32
      shape: [4, 6]
      type: tensor
      kind: target/joint/position_chunk
      element_names: [__temporal_axis__, [hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
      temporal_period_ms: 20
    - name: h
      dtype: float32
      shape: [6]
      type: tensor
    - name: kp
      dtype: float32
      shape: [6]
      type: tensor
      kind: kp
      element_names: [[hip_l, knee_l, ankle_l, hip_r, knee_r, ankle_r]]
    parameters:
      model_path: policy.pt
      md5sum: 070fe030406f9bb0980511d73eb2f116
      sha256sum: ed4695b02f8a37ac2d6bd5eab3fa289d6600087515d6992a1f7e8f0d5b06c056
      backend: jit
      warp_segments: 0
  post:
    inputs:
    - name: action
      dtype: float32
      shape: [6]
      type: tensor
    outputs:
    - name: scaled
      dtype: float32
      shape: [6]
      type: tensor
    parameters:
      model_path: post.pt2
      md5sum: 7ea488b39c147dc629a5dd8daaea8802
      sha256sum: 0488e77076f73b472e61191c63fbc4e9168b55004f76ceb1dd5a2ba5eee1eae4
      backend: pt2
      warp_segments: 0
      torch_version: 2.13.0+cpu

pipeline:
  configs:
    frequency: 50
    runtime: ros2
  data_flow:
    policy/action: [post/action]
  feedback_flow:
    policy/h: [policy/h]
  initial_values: sem_graph_initial_values.safetensors
  inputs:
    policy: [joint_pos, joint_vel]
  outputs:
    policy: [action_chunk, kp]
    post: [scaled]

system information:
  cuda version: None
  leapp config version: '1.3'
  leapp version: 0.7.2
  os: Debian GNU/Linux 12
  python version: 3.11.7
  torch version: 2.13.0+cpu
  warp version: null
"""
